//! Maka's canonical tool-arguments hash (`canonicalToolArgsHash`). Pure.

use crate::json::Json;

/// Why Maka's hash function throws for these arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsHashError {
    #[error("tool argument identity requires a tool name")]
    EmptyToolName,
    #[error("tool arguments must be strict JSON values")]
    NotStrictJson,
}

/// `"sha256:" + hex(SHA-256(preimage))` where the preimage is the sorted-key JSON of
/// `{"args": args, "toolName": tool_name}` with `__proto__` keys dropped and the arrays
/// under keys named `required` / `enum` sorted by ICU root collation of their JSON.
pub fn canonical_tool_args_hash(
    _tool_name: &crate::json::JsStr,
    _args: &Json,
) -> Result<String, ArgsHashError> {
    todo!("args hash")
}

//! `JSON.stringify`-compatible output and Maka's `stableJsonStringify`.

use super::Json;

/// Why a value cannot be written as strict JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StringifyError {
    /// A number that JSON cannot represent (NaN or an infinity).
    #[error("value is not strict JSON: non-finite number")]
    NonFinite,
}

/// Maka's `stableJsonStringify`: compact JSON, object keys at every depth in
/// JavaScript property order (canonical array-index keys first in numeric order, then
/// the rest in UTF-16 code-unit order), numbers and strings as `JSON.stringify` prints
/// them. Arrays keep their order; `__proto__` keys are ordinary data.
pub fn stable_stringify(_value: &Json) -> Result<String, StringifyError> {
    todo!("stable stringify")
}

/// ECMAScript `Number::toString` for a finite double (`-0` prints as `0`).
pub fn js_number_to_string(_n: f64) -> String {
    todo!("js number formatting")
}

/// Appends `s` as a JSON string literal, escaped as `JSON.stringify` escapes it.
pub fn write_js_string(_out: &mut String, _s: &super::JsStr) {
    todo!("js string escaping")
}

//! The operation index: operation ids bound by a dispatch (Maka's `byOperation`), kept
//! compactly for the whole scan, and operations found and handed out by index.

use crate::fast_hash::HashMap;

use super::{LateTouch, Operation, ToolLedgerScanner};
use crate::json::JsStr;

/// Operation ids bound by a dispatch (Maka's `byOperation`), compactly: it holds every
/// operation of the file for the whole scan, so its entry is what grows with the
/// file. Canonical ids (`toolop_` + 32 lowercase hex) are 128-bit keys (two `u64`s,
/// so an entry is 24 bytes, not 32 with a `u128`'s alignment), any other id its
/// string; values are global operation indexes (see `ToolLedgerScanner::ops_base`).
/// The binding dispatch's event id of a closed operation is kept aside only when it
/// is not the usual `<operationId>_dispatch` (rare).
#[derive(Default)]
pub(super) struct OpIds {
    hex: HashMap<[u64; 2], usize>,
    other: HashMap<JsStr, usize>,
    unusual_dispatch: HashMap<usize, JsStr>,
}

/// Each byte's value as a lowercase hex digit, or `NOT_HEX`.
const HEX_DIGIT: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut c = 0;
    while c < 10 {
        t[b'0' as usize + c] = c as u8;
        c += 1;
    }
    let mut c = 0;
    while c < 6 {
        t[b'a' as usize + c] = 10 + c as u8;
        c += 1;
    }
    t
};
const NOT_HEX: u8 = 0x10;

fn canonical_op_key(id: &JsStr) -> Option<[u64; 2]> {
    let b = id.as_wtf8();
    if b.len() != 39 || !b.starts_with(b"toolop_") {
        return None;
    }
    // Without a branch per digit: every dispatch and every late touch looks one up.
    let mut v = [0u64; 2];
    let mut seen = 0u8;
    for (half, digits) in v.iter_mut().zip(b[7..].chunks_exact(16)) {
        for &c in digits {
            let d = HEX_DIGIT[usize::from(c)];
            seen |= d;
            *half = (*half << 4) | u64::from(d & 0xf);
        }
    }
    (seen & NOT_HEX == 0).then_some(v)
}

impl OpIds {
    /// The global index of the operation `id` names.
    pub(super) fn get(&self, id: &JsStr) -> Option<usize> {
        match canonical_op_key(id) {
            Some(k) => self.hex.get(&k).copied(),
            None => self.other.get(id).copied(),
        }
    }
    pub(super) fn insert(&mut self, id: &JsStr, index: usize) {
        match canonical_op_key(id) {
            Some(k) => self.hex.insert(k, index),
            None => self.other.insert(id.clone(), index),
        };
    }
    /// Room for `n` more canonical ids without growing (a table that doubles holds
    /// both sizes for a moment).
    fn reserve(&mut self, n: usize) {
        self.hex.reserve(n);
    }
}
impl ToolLedgerScanner {
    /// Under [`ScanOptions::assume_store_order`]: ends the current invocation and hands
    /// out every operation opened since the last call (in open order). Later events can
    /// still reach them only through their operation id; such changes are collected
    /// as [`LateTouch`]es. Without store order, returns nothing.
    pub fn close_invocation(&mut self) -> Vec<Operation> {
        if !self.options.assume_store_order {
            return Vec::new();
        }
        self.current = None;
        self.spines.clear();
        self.interned.clear();
        let mut out = std::mem::take(&mut self.closed);
        let ops = std::mem::take(&mut self.operations);
        self.ops_base += ops.len();
        out.extend(ops);
        for op in &out {
            if let (Some(id), Some(d)) = (&op.operation_id, &op.dispatch) {
                let usual = d.event_id.as_wtf8().strip_suffix(b"_dispatch") == Some(id.as_wtf8());
                if !usual {
                    if let Some(index) = self.by_operation.get(id) {
                        self.by_operation
                            .unusual_dispatch
                            .insert(index, d.event_id.clone());
                    }
                }
            }
        }
        out
    }

    /// Room for `n` more bound operation ids without growing the index.
    pub fn reserve_operations(&mut self, n: usize) {
        self.by_operation.reserve(n);
    }

    /// Changes to operations already handed out by `close_invocation`.
    pub fn take_late_touches(&mut self) -> Vec<LateTouch> {
        std::mem::take(&mut self.late)
    }

    /// Whether a dispatch bound `operation_id` (Maka's `byOperation` has it).
    pub fn is_bound(&self, operation_id: &JsStr) -> bool {
        self.by_operation.get(operation_id).is_some()
    }

    /// The index of the operation `operation_id` is bound to, if it is bound (one
    /// index per bound id; ids stay bound for the whole scan).
    pub fn bound_index(&self, operation_id: &JsStr) -> Option<usize> {
        self.by_operation.get(operation_id)
    }

    /// The event id of the dispatch that bound `operation_id`, once its operation is
    /// closed.
    pub fn binding_dispatch(&self, operation_id: &JsStr) -> Option<JsStr> {
        let index = self.by_operation.get(operation_id)?;
        let first_closed = self.ops_base - self.closed.len();
        if index >= first_closed {
            let op = if index >= self.ops_base {
                &self.operations[index - self.ops_base]
            } else {
                &self.closed[index - first_closed]
            };
            return op.dispatch.as_ref().map(|d| d.event_id.clone());
        }
        let unusual = self.by_operation.unusual_dispatch.get(&index).cloned();
        Some(unusual.unwrap_or_else(|| {
            let mut b = operation_id.as_wtf8().to_vec();
            b.extend_from_slice(b"_dispatch");
            JsStr::from_wtf8_unchecked(b)
        }))
    }

    /// The operation of global index `index`, unless it was handed out.
    pub(super) fn any_op(&mut self, index: usize) -> Option<&mut Operation> {
        if index >= self.ops_base {
            return self.operations.get_mut(index - self.ops_base);
        }
        let first_closed = self.ops_base - self.closed.len();
        index
            .checked_sub(first_closed)
            .and_then(|i| self.closed.get_mut(i))
    }

    pub(super) fn op(&mut self, index: usize) -> &mut Operation {
        &mut self.operations[index - self.ops_base]
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_toolop_and_32_lowercase_hex_digits_make_a_128_bit_key() {
        // The plain reading: each digit in turn, lowercase only.
        let reference = |id: &str| -> Option<[u64; 2]> {
            let hex = id.strip_prefix("toolop_")?;
            if hex.len() != 32 || !hex.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
                return None;
            }
            let n = u128::from_str_radix(hex, 16).ok()?;
            Some([(n >> 64) as u64, n as u64])
        };
        let good = "toolop_07805ab410550785aecd221eff4cb9b7";
        let mut ids: Vec<String> = vec![
            good.into(),
            "toolop_00000000000000000000000000000000".into(),
            "toolop_ffffffffffffffffffffffffffffffff".into(),
            "toolop_0123456789abcdef0123456789abcdef".into(),
            good[..38].into(),
            format!("{good}0"),
            good.replace("toolop_", "toolopx"),
            "TOOLOP_07805ab410550785aecd221eff4cb9b7".into(),
        ];
        // One wrong byte at every digit position.
        for at in 7..39 {
            for bad in ['A', 'F', 'g', '/', ':', '`', '@', 'G', ' '] {
                let mut s = good.to_owned();
                s.replace_range(at..at + 1, &bad.to_string());
                ids.push(s);
            }
        }
        ids.push(format!("toolop_{}\u{e9}", &good[7..37]));
        for id in &ids {
            assert_eq!(
                canonical_op_key(&JsStr::from(id.as_str())),
                reference(id),
                "{id}"
            );
        }
        assert_eq!(
            canonical_op_key(&JsStr::from(good)),
            Some([0x07805ab410550785, 0xaecd221eff4cb9b7])
        );
    }
}

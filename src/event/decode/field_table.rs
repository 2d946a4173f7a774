//! Table-driven checks for the closed records that are kept as JSON: a record is a
//! list of fields (`F`: name, required, `Ty`), and `check_closed` reads a value against
//! it the way Maka does. The in-place decoder reads the same tables (`Fields`).

use super::error_path::{at, at_index, describe, expected, missing, one_of, quote, unknown_key, V};
use super::field_readers::{is_safe_integer, is_sha256_digest};
use crate::event::key_order::{KeyOrder, MAX_NAMES};
use crate::json::{JsObject, Json};

// ---------------------------------------------------------------------------------
// Table-driven checks for closed records that are kept as JSON
// ---------------------------------------------------------------------------------

#[derive(Clone, Copy)]
pub(in crate::event) enum Ty {
    /// Presence only.
    Any,
    Str,
    NonEmptyStr,
    Bool,
    /// Exactly `true`.
    True,
    Finite,
    SafeIntNonNeg,
    SafeIntPos,
    /// The number 1.
    One,
    /// The number 0 (`-0` included, as `=== 0`).
    Zero,
    Enum(&'static [&'static str]),
    StrArray,
    /// An object whose values are all finite numbers.
    StrNumRecord,
    Sha256,
    /// A closed record of these fields.
    Record(&'static Fields),
    /// An array of closed records of these fields.
    Records(&'static Fields),
    Check(fn(&Json) -> V<()>),
}

/// A field of a closed record: name, required, type.
#[derive(Clone, Copy)]
pub(in crate::event) struct F(
    pub(in crate::event) &'static str,
    pub(in crate::event) bool,
    pub(in crate::event) Ty,
);

/// The fields of a closed record that the in-place decoder also reads, with their
/// sorted order, in which it looks for a key's field.
pub(in crate::event) struct Fields {
    pub(in crate::event) list: &'static [F],
    pub(in crate::event) order: KeyOrder,
    /// A bit per required field, by index.
    pub(in crate::event) required: u128,
}

impl Fields {
    pub(in crate::event) const fn new(list: &'static [F]) -> Fields {
        assert!(list.len() <= MAX_NAMES, "too many fields");
        let mut names = [""; MAX_NAMES];
        let mut required = 0u128;
        let mut k = 0;
        while k < list.len() {
            names[k] = list[k].0;
            if list[k].1 {
                required |= 1 << k;
            }
            k += 1;
        }
        Fields {
            list,
            order: KeyOrder::new(names.split_at(list.len()).0),
            required,
        }
    }
}

pub(in crate::event) fn check_ty(v: &Json, ty: Ty) -> V<()> {
    let ok = match ty {
        Ty::Any => true,
        Ty::Str => matches!(v, Json::String(_)),
        Ty::NonEmptyStr => match v {
            Json::String(s) if s.is_empty() => return Err(": must be a non-empty string".into()),
            Json::String(_) => true,
            _ => false,
        },
        Ty::Bool => matches!(v, Json::Bool(_)),
        Ty::True => matches!(v, Json::Bool(true)),
        Ty::Finite => matches!(v, Json::Number(n) if n.is_finite()),
        Ty::SafeIntNonNeg => matches!(v, Json::Number(n) if is_safe_integer(*n) && *n >= 0.0),
        Ty::SafeIntPos => matches!(v, Json::Number(n) if is_safe_integer(*n) && *n > 0.0),
        Ty::One => matches!(v, Json::Number(n) if *n == 1.0),
        Ty::Zero => matches!(v, Json::Number(n) if *n == 0.0),
        Ty::Enum(domain) => matches!(v, Json::String(s) if domain.iter().any(|d| *s == **d)),
        Ty::StrArray => match v {
            Json::Array(items) => {
                if let Some(i) = items.iter().position(|x| !matches!(x, Json::String(_))) {
                    return Err(at_index(i, expected("a string", &items[i])));
                }
                true
            }
            _ => false,
        },
        Ty::StrNumRecord => match v {
            Json::Object(o) => {
                for (k, x) in o.iter() {
                    if !matches!(x, Json::Number(n) if n.is_finite()) {
                        return Err(format!(
                            "{}: expected a finite number, got {}",
                            quote(k),
                            describe(x)
                        ));
                    }
                }
                true
            }
            _ => false,
        },
        Ty::Sha256 => matches!(v, Json::String(s) if is_sha256_digest(s)),
        Ty::Record(fields) => return check_closed(v, fields.list).map(|_| ()),
        Ty::Records(Fields { list: fields, .. }) => {
            let Json::Array(items) = v else {
                return Err(expected("an array", v));
            };
            for (i, x) in items.iter().enumerate() {
                check_closed(x, fields).map_err(|e| at_index(i, e))?;
            }
            return Ok(());
        }
        Ty::Check(f) => return f(v),
    };
    if ok {
        return Ok(());
    }
    let what = match ty {
        Ty::Any | Ty::Check(_) | Ty::Record(_) | Ty::Records(_) => "a value".to_string(),
        Ty::Str => "a string".into(),
        Ty::NonEmptyStr => "a non-empty string".into(),
        Ty::Bool => "a boolean".into(),
        Ty::True => "true".into(),
        Ty::Finite => "a finite number".into(),
        Ty::SafeIntNonNeg => "a safe integer >= 0".into(),
        Ty::SafeIntPos => "a safe integer > 0".into(),
        Ty::One => "the number 1".into(),
        Ty::Zero => "the number 0".into(),
        Ty::Enum(domain) => one_of(domain),
        Ty::StrArray => "an array of strings".into(),
        Ty::StrNumRecord => "an object of finite numbers".into(),
        Ty::Sha256 => "a sha256:<64 lowercase hex> digest".into(),
    };
    match (ty, v) {
        (Ty::Enum(_), Json::String(s)) => Err(format!(": expected {what}, got {}", quote(s))),
        (Ty::Sha256, Json::String(s)) => Err(format!(": expected {what}, got {}", quote(s))),
        _ => Err(expected(&what, v)),
    }
}

/// Maka's `isRecord` + `hasExactShape` + the field checks, in that order.
pub(super) fn check_closed<'a>(v: &'a Json, fields: &[F]) -> V<&'a JsObject> {
    let Some(o) = v.as_object() else {
        return Err(expected("an object", v));
    };
    for k in o.keys() {
        if !fields.iter().any(|f| *k == *f.0) {
            return Err(unknown_key(k));
        }
    }
    for f in fields {
        if f.1 && !o.contains_key(f.0) {
            return Err(missing(f.0));
        }
    }
    for f in fields {
        if let Some(x) = o.get(f.0) {
            check_ty(x, f.2).map_err(|e| at(f.0, e))?;
        }
    }
    Ok(o)
}

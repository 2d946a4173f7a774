//! Maka's canonical tool-arguments hash (`canonicalToolArgsHash`). Pure.

use crate::json::{stable_stringify, write_js_string, write_stable, JsObject, JsStr, Json};
use icu_collator::{options::CollatorOptions, CollatorBorrowed, CollatorPreferences};
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

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
///
/// The example is the value Maka itself computes (maka-format §7):
///
/// ```
/// use wsledger::args_hash::canonical_tool_args_hash;
/// use wsledger::json::{parse, JsStr};
///
/// let args = parse(r#"{"path":"README.md","limit":20}"#).unwrap();
/// assert_eq!(
///     canonical_tool_args_hash(&JsStr::new("read_file"), &args).unwrap(),
///     "sha256:ce4de5e5b11c1206b69ff9f5af1eb75de5ec3eacd5d6558af95cb05e660e8706"
/// );
/// ```
pub fn canonical_tool_args_hash(
    tool_name: &crate::json::JsStr,
    args: &Json,
) -> Result<String, ArgsHashError> {
    let preimage = identity_preimage(tool_name, args)?;
    Ok(sha256_text(&preimage))
}

/// `"sha256:"` and the hex of the SHA-256 of `preimage`.
fn sha256_text(preimage: &str) -> String {
    // Written digit by digit: once per tool call of a scan, where `hex::encode`'s
    // character iterator showed in profiles.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in Sha256::digest(preimage.as_bytes()) {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// [`canonical_tool_args_hash`] of the arguments whose JSON text is `text`, taken
/// from the text as written when it is already their identity form (see
/// [`identity_form_end`]); `None` when it may not be: then parse it and call
/// [`canonical_tool_args_hash`].
pub fn hash_as_written(tool_name: &JsStr, text: &str) -> Option<Result<String, ArgsHashError>> {
    (identity_form_end(text.as_bytes(), 0) == Some(text.len()))
        .then(|| hash_of_identity_form(tool_name, text))
}

/// [`canonical_tool_args_hash`] of the arguments whose JSON text is `raw`, for a
/// `raw` that [`identity_form_end`] spans whole: then the text is its own identity
/// form, and is hashed as it stands, without parsing it.
pub(crate) fn hash_of_identity_form(tool_name: &JsStr, raw: &str) -> Result<String, ArgsHashError> {
    debug_assert_eq!(identity_form_end(raw.as_bytes(), 0), Some(raw.len()));
    if tool_name.is_empty() {
        return Err(ArgsHashError::EmptyToolName);
    }
    let mut preimage = String::with_capacity(raw.len() + tool_name.utf8_len() + 24);
    preimage.push_str("{\"args\":");
    preimage.push_str(raw);
    preimage.push_str(",\"toolName\":");
    write_js_string(&mut preimage, tool_name);
    preimage.push('}');
    Ok(sha256_text(&preimage))
}

/// The end of the JSON value at `i` of `b` when its text is already its own identity
/// form: the bytes [`identity_preimage`] would write for it, with nothing for
/// [`canonicalize`] to change and no number that is not finite. Most arguments Maka
/// stores are (it writes them with their keys sorted), and this spares parsing them
/// into a tree and writing them out again. `None` for anything it does not vouch for,
/// whatever the identity form would be: white space, an escape, a number that is not
/// an integer of at most 15 digits (or is `-0`), an object key that is not ASCII,
/// starts with a digit (JavaScript lists index keys first), is `__proto__`, is not
/// after the key before it, or names an array (`required`, `enum`), and nesting deeper
/// than 64. Such arguments are hashed the long way.
pub(crate) fn identity_form_end(b: &[u8], i: usize) -> Option<usize> {
    identity_value_end(b, i, 64)
}

fn identity_value_end(b: &[u8], mut i: usize, depth: u32) -> Option<usize> {
    match *b.get(i)? {
        b'"' => identity_string_end(b, i),
        b'{' => {
            let depth = depth.checked_sub(1)?;
            i += 1;
            if b.get(i) == Some(&b'}') {
                return Some(i + 1);
            }
            let mut prev: Option<&[u8]> = None;
            loop {
                let end = identity_string_end(b, i)?;
                let key = &b[i + 1..end - 1];
                // For ASCII keys, byte order is JavaScript's code-unit order.
                if !key.is_ascii()
                    || key.first().is_some_and(u8::is_ascii_digit)
                    || key == b"__proto__"
                    || prev.is_some_and(|p| key <= p)
                {
                    return None;
                }
                prev = Some(key);
                if b.get(end) != Some(&b':') {
                    return None;
                }
                i = end + 1;
                if b.get(i) == Some(&b'[') && (key == b"required" || key == b"enum") {
                    return None;
                }
                i = identity_value_end(b, i, depth)?;
                match b.get(i)? {
                    b',' => i += 1,
                    b'}' => return Some(i + 1),
                    _ => return None,
                }
            }
        }
        b'[' => {
            let depth = depth.checked_sub(1)?;
            i += 1;
            if b.get(i) == Some(&b']') {
                return Some(i + 1);
            }
            loop {
                i = identity_value_end(b, i, depth)?;
                match b.get(i)? {
                    b',' => i += 1,
                    b']' => return Some(i + 1),
                    _ => return None,
                }
            }
        }
        b't' => b[i..].starts_with(b"true").then_some(i + 4),
        b'f' => b[i..].starts_with(b"false").then_some(i + 5),
        b'n' => b[i..].starts_with(b"null").then_some(i + 4),
        _ => {
            let negative = b[i] == b'-';
            let from = i + usize::from(negative);
            let digits = b[from..].iter().take_while(|d| d.is_ascii_digit()).count();
            let end = from + digits;
            // No leading zero; a lone zero only unsigned (`-0` is written `0`).
            let zero_first = digits > 0 && b[from] == b'0';
            let ok = (1..=15).contains(&digits)
                && (!zero_first || (digits == 1 && !negative))
                && !matches!(b.get(end), Some(b'.' | b'e' | b'E'));
            ok.then_some(end)
        }
    }
}

/// The end of the string at `i` when it has no escape (nor control character): its
/// identity form is its own text.
fn identity_string_end(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let end = crate::json::find_string_stop(b, i + 1)?;
    (b[end] == b'"').then_some(end + 1)
}

/// The exact text whose SHA-256 is [`canonical_tool_args_hash`] (Maka's identity
/// preimage), with the same errors.
pub fn identity_preimage(tool_name: &JsStr, args: &Json) -> Result<String, ArgsHashError> {
    if tool_name.is_empty() {
        return Err(ArgsHashError::EmptyToolName);
    }
    // Maka validates the whole value first, `__proto__` subtrees included.
    let (non_finite, changes) = survey(args);
    if non_finite {
        return Err(ArgsHashError::NotStrictJson);
    }
    // Most arguments have nothing to remove or sort: their identity form is
    // themselves, and copying the tree would be most of this function's work.
    let canonical = if changes {
        std::borrow::Cow::Owned(canonicalize(args))
    } else {
        std::borrow::Cow::Borrowed(args)
    };
    // The wrapper's two keys are already in property order: "args" < "toolName".
    let mut out = String::from("{\"args\":");
    write_stable(&mut out, &canonical).map_err(|_| ArgsHashError::NotStrictJson)?;
    out.push_str(",\"toolName\":");
    write_js_string(&mut out, tool_name);
    out.push('}');
    Ok(out)
}

/// Whether `value` holds a number that is not finite, and whether [`canonicalize`]
/// would change it: a `__proto__` key to remove, or an array of two or more items
/// under a key whose array is sorted.
fn survey(value: &Json) -> (bool, bool) {
    let mut changes = false;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Json::Number(n) if !n.is_finite() => return (true, changes),
            Json::Array(items) => stack.extend(items.iter()),
            Json::Object(o) => {
                for (k, c) in o.iter() {
                    changes |= *k == "__proto__"
                        || (sorts_its_array(k) && matches!(c, Json::Array(a) if a.len() > 1));
                    stack.push(c);
                }
            }
            _ => {}
        }
    }
    (false, changes)
}

/// Keys whose array value is sorted in the identity preimage.
fn sorts_its_array(key: &JsStr) -> bool {
    *key == "required" || *key == "enum"
}

/// The identity form of the arguments: every `__proto__` key removed, and every
/// array that is the value of a `required` or `enum` key stably sorted by collation
/// of its elements' canonical JSON. Built without recursion.
fn canonicalize(args: &Json) -> Json {
    enum Frame<'a> {
        Array {
            items: std::slice::Iter<'a, Json>,
            out: Vec<Json>,
            sort: bool,
        },
        Object {
            entries: std::slice::Iter<'a, (JsStr, Json)>,
            out: JsObject,
            key: Option<&'a JsStr>,
        },
    }
    fn open<'a>(v: &'a Json, parent_key: Option<&JsStr>) -> Result<Frame<'a>, Json> {
        match v {
            Json::Array(items) => Ok(Frame::Array {
                items: items.iter(),
                out: Vec::with_capacity(items.len()),
                sort: parent_key.is_some_and(sorts_its_array),
            }),
            Json::Object(o) => Ok(Frame::Object {
                entries: o.entries().iter(),
                out: JsObject::new(),
                key: None,
            }),
            scalar => Err(scalar.clone()),
        }
    }

    let mut stack = match open(args, None) {
        Ok(f) => vec![f],
        Err(v) => return v,
    };
    loop {
        let top = stack.last_mut().expect("stack is not empty here");
        // The next child and the key it sits under (none for array elements, so an
        // array directly inside a sorted array is not sorted).
        let next = match top {
            Frame::Array { items, .. } => items.next().map(|v| (v, None)),
            Frame::Object { entries, key, .. } => entries
                .by_ref()
                .find(|(k, _)| *k != "__proto__")
                .map(|(k, v)| {
                    *key = Some(k);
                    (v, Some(k))
                }),
        };
        let done = match next {
            Some((child, parent_key)) => match open(child, parent_key) {
                Ok(f) => {
                    stack.push(f);
                    continue;
                }
                Err(v) => v,
            },
            None => match stack.pop() {
                Some(Frame::Array {
                    out, sort: true, ..
                }) => Json::Array(collation_sorted(out)),
                Some(Frame::Array {
                    out, sort: false, ..
                }) => Json::Array(out),
                Some(Frame::Object { out, .. }) => Json::Object(out),
                None => unreachable!("stack is not empty here"),
            },
        };
        match stack.last_mut() {
            None => return done,
            Some(Frame::Array { out, .. }) => out.push(done),
            Some(Frame::Object { out, key, .. }) => {
                // Keys of a parsed object are unique.
                out.push_unique(key.expect("key set with its value").clone(), done)
            }
        }
    }
}

/// `items.sort((a, b) => json(a).localeCompare(json(b)))` under Node's default
/// locale (`en-US`): a stable sort by ICU collation, root rules, tertiary strength.
fn collation_sorted(items: Vec<Json>) -> Vec<Json> {
    if items.len() < 2 {
        return items;
    }
    let mut keyed: Vec<(String, Json)> = items
        .into_iter()
        .map(|item| {
            // Numbers were checked finite before canonicalizing.
            let text = stable_stringify(&item).unwrap_or_default();
            (text, item)
        })
        .collect();
    let collator = collator();
    keyed.sort_by(|a, b| collator.compare(&a.0, &b.0));
    keyed.into_iter().map(|(_, item)| item).collect()
}

fn collator() -> &'static CollatorBorrowed<'static> {
    static COLLATOR: OnceLock<CollatorBorrowed<'static>> = OnceLock::new();
    COLLATOR.get_or_init(|| {
        // Root collation (`en` has no tailoring), default options: tertiary strength,
        // no numeric ordering, punctuation not ignored.
        CollatorBorrowed::try_new(CollatorPreferences::default(), CollatorOptions::default())
            .expect("compiled collation data for the root locale")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn preimage(tool: &str, args: &str) -> String {
        identity_preimage(&JsStr::new(tool), &parse(args).unwrap()).unwrap()
    }

    /// Where the identity-form check vouches for a text, hashing the text as it
    /// stands gives the hash of its parse; and it vouches for the plain cases.
    #[test]
    fn a_text_in_identity_form_hashes_as_its_parse() {
        let vectors = include_str!("../tests/vectors/args-hash.jsonl");
        let mut texts: Vec<(String, String)> = Vec::new();
        for line in vectors.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let tool = v["tool_name"].as_str().unwrap().to_owned();
            for k in ["args_json", "stable_json"] {
                if let Some(t) = v[k].as_str() {
                    texts.push((tool.clone(), t.to_owned()));
                }
            }
        }
        for t in [
            r#"{"limit":5,"offset":10,"path":"a.txt"}"#,
            r#"{"":1,"a":[1,-2,"x",true,false,null,{}],"b":{"c":[]}}"#,
            "{\"command\":\"ls -la\",\"description\":\"caf\u{e9} \u{1f600}\"}",
            "7",
            "-7",
            r#""x""#,
            "[]",
            "{}",
            "999999999999999",
            r#"{"enum":{"a":1},"required":"x"}"#,
        ] {
            assert_eq!(identity_form_end(t.as_bytes(), 0), Some(t.len()), "{t}");
            texts.push(("Read".to_owned(), t.to_owned()));
        }
        for t in [
            "-0",
            "0.5",
            "1e3",
            "01",
            "9007199254740993",
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":1}"#,
            r#"{"__proto__":1}"#,
            r#"{"required":["b","a"]}"#,
            r#"{"enum":[]}"#,
            r#"{"0":1}"#,
            "{\"\u{e9}\":1}",
            r#" {"a":1}"#,
            r#"{"a": 1}"#,
            r#"{"a":"\n"}"#,
            r#"{"a":"\u0041"}"#,
            "tru",
            "[1,]",
            r#"{"a":1,}"#,
            "",
        ] {
            let end = identity_form_end(t.as_bytes(), 0);
            assert!(end != Some(t.len()), "{t}");
            texts.push(("Read".to_owned(), t.to_owned()));
        }
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(identity_form_end(deep.as_bytes(), 0), None);
        let mut damage = crate::mutate::Mutator::new(0x5bd1_e995_7f4a_7c15);
        let base = texts.clone();
        for _ in 0..40 {
            for (tool, t) in &base {
                if let Some(m) = damage.mutate(t) {
                    texts.push((tool.clone(), m));
                }
            }
        }
        let mut vouched = 0;
        for (tool, t) in &texts {
            if identity_form_end(t.as_bytes(), 0) != Some(t.len()) {
                continue;
            }
            vouched += 1;
            let tool = JsStr::new(tool);
            let parsed = parse(t).unwrap_or_else(|e| panic!("{t}: {e}"));
            assert_eq!(
                hash_of_identity_form(&tool, t),
                canonical_tool_args_hash(&tool, &parsed),
                "{t}"
            );
        }
        assert!(vouched > 100, "{vouched} of {}", texts.len());
        assert_eq!(
            hash_of_identity_form(&JsStr::new(""), "{}"),
            Err(ArgsHashError::EmptyToolName)
        );
    }

    #[test]
    fn documented_example() {
        // maka-format.md §7: read_file + {"limit":20,"path":"README.md"}.
        let args = parse(r#"{"path":"README.md","limit":20}"#).unwrap();
        assert_eq!(
            canonical_tool_args_hash(&JsStr::new("read_file"), &args).unwrap(),
            "sha256:ce4de5e5b11c1206b69ff9f5af1eb75de5ec3eacd5d6558af95cb05e660e8706"
        );
    }

    /// The survey asks for `canonicalize` whenever it would change the value, so
    /// skipping it otherwise gives the same preimage.
    #[test]
    fn arguments_are_left_as_they_are_only_when_nothing_would_change() {
        // (arguments, whether the survey asks for canonicalize)
        for (text, asks) in [
            (r#"{"path":"README.md","limit":20}"#, false),
            (r#"{"b":[3,1,2],"a":{"enum":["x"],"required":[]}}"#, false),
            (r#"{"required":"not an array","enum":{"a":1}}"#, false),
            (r#"[["b","a"],{"q":[3,2]}]"#, false),
            ("7", false),
            (r#"{"schema":{"required":["b","a"]}}"#, true),
            (r#"{"enum":[2,1]}"#, true),
            (r#"[{"__proto__":1}]"#, true),
            (r#"{"x":{"y":{"__proto__":{"z":1}}}}"#, true),
            (r#"[{"q":[{"required":[1,0]}]}]"#, true),
            // Already sorted: asked all the same (canonicalize then changes nothing).
            (r#"{"required":["a","b"]}"#, true),
        ] {
            let args = parse(text).unwrap();
            assert_eq!(survey(&args), (false, asks), "{text}");
            assert!(asks || canonicalize(&args) == args, "{text}");
            let mut forced = String::from("{\"args\":");
            write_stable(&mut forced, &canonicalize(&args)).unwrap();
            forced.push_str(",\"toolName\":\"t\"}");
            assert_eq!(preimage("t", text), forced, "{text}");
        }
    }

    #[test]
    fn errors() {
        let args = parse("{}").unwrap();
        assert_eq!(
            canonical_tool_args_hash(&JsStr::new(""), &args),
            Err(ArgsHashError::EmptyToolName)
        );
        // Non-finite anywhere, even under a dropped `__proto__` key.
        for text in [r#"{"__proto__":{"x":1e400}}"#, "[1,[-1e999]]", "1e400"] {
            let args = parse(text).unwrap();
            assert_eq!(
                canonical_tool_args_hash(&JsStr::new("t"), &args),
                Err(ArgsHashError::NotStrictJson),
                "{text}"
            );
        }
        // The empty name is reported before the non-finite number.
        let args = parse("1e400").unwrap();
        assert_eq!(
            canonical_tool_args_hash(&JsStr::new(""), &args),
            Err(ArgsHashError::EmptyToolName)
        );
    }

    #[test]
    fn proto_keys_dropped_at_every_depth() {
        assert_eq!(
            preimage("t", r#"[{"__proto__":1,"a":{"__proto__":[2]}},{"b":2}]"#),
            r#"{"args":[{"a":{}},{"b":2}],"toolName":"t"}"#
        );
        // Only the exact key; an escaped spelling is the same key.
        assert_eq!(
            preimage("t", r#"{"__proto_":1,"\u005f_proto__":2,"__PROTO__":3}"#),
            r#"{"args":{"__PROTO__":3,"__proto_":1},"toolName":"t"}"#
        );
    }

    #[test]
    fn which_arrays_are_sorted() {
        assert_eq!(
            preimage(
                "t",
                r#"{"Required":["b","a"],"required":[["b","a"],"c","a"],"list":["b","a"],
                    "items":[{"enum":["y","x"]}],"enum":[{"required":["d","c"]}]}"#
            ),
            concat!(
                r#"{"args":{"Required":["b","a"],"enum":[{"required":["c","d"]}],"#,
                r#""items":[{"enum":["x","y"]}],"list":["b","a"],"required":["a","c",["b","a"]]},"#,
                r#""toolName":"t"}"#
            )
        );
        // Arguments that are themselves an array are not sorted, nor is a tool named
        // like a sorted key.
        assert_eq!(
            preimage("enum", r#"["b","a"]"#),
            r#"{"args":["b","a"],"toolName":"enum"}"#
        );
    }

    #[test]
    fn collation_order() {
        assert_eq!(
            preimage("t", r#"{"enum":["b","B","a","A","é","e","E","f"]}"#),
            r#"{"args":{"enum":["a","A","b","B","e","E","é","f"]},"toolName":"t"}"#
        );
        // Elements compare by their JSON text. A string's opening quote is punctuation,
        // which ICU orders before digits and letters; numbers do not sort numerically.
        assert_eq!(
            preimage("t", r#"{"enum":[true,"1",10,9,null,-0]}"#),
            r#"{"args":{"enum":["1",0,10,9,null,true]},"toolName":"t"}"#
        );
        // Collation-equal elements keep their input order (stable sort).
        assert_eq!(
            preimage("t", r#"{"enum":["a\u200bb","ab"]}"#),
            "{\"args\":{\"enum\":[\"a\u{200b}b\",\"ab\"]},\"toolName\":\"t\"}"
        );
        assert_eq!(
            preimage("t", r#"{"enum":["ab","a\u200bb"]}"#),
            "{\"args\":{\"enum\":[\"ab\",\"a\u{200b}b\"]},\"toolName\":\"t\"}"
        );
    }

    #[test]
    fn tool_name_and_lone_surrogates_are_escaped() {
        let name = parse(r#""a\"\ud800""#).unwrap().into_js_string().unwrap();
        let args = parse(r#"{"enum":["\udc00","x"]}"#).unwrap();
        assert_eq!(
            identity_preimage(&name, &args).unwrap(),
            r#"{"args":{"enum":["\udc00","x"]},"toolName":"a\"\ud800"}"#
        );
    }

    #[test]
    fn deep_arguments_do_not_overflow() {
        const DEPTH: usize = 200_000;
        let text = r#"{"enum":["#.repeat(DEPTH) + &"]}".repeat(DEPTH);
        let args = parse(&text).unwrap();
        let p = identity_preimage(&JsStr::new("t"), &args).unwrap();
        assert_eq!(p, format!(r#"{{"args":{text},"toolName":"t"}}"#));
        let text = r#"[{"__proto__":0,"a":"#.repeat(DEPTH) + "0" + &"}]".repeat(DEPTH);
        let args = parse(&text).unwrap();
        let p = identity_preimage(&JsStr::new("t"), &args).unwrap();
        let expected = r#"[{"a":"#.repeat(DEPTH) + "0" + &"}]".repeat(DEPTH);
        assert_eq!(p, format!(r#"{{"args":{expected},"toolName":"t"}}"#));
    }
}

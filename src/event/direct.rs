//! The common RuntimeEvent decoded straight from its text.
//!
//! Building the whole `Json` tree of a payload and then taking it apart costs about
//! five times checking its grammar: every key and string is allocated, moved into an
//! object and moved out again. Most stored payloads are plain: known keys, each once,
//! no escapes in the envelope's strings. For those the envelope and `refs` are read in
//! place, and only `content` and `actions` are parsed into trees for the exact decoder.
//!
//! This path accepts a subset of what the exact one does, never more: whatever is
//! unusual (an escape, a repeated or unknown key, a value of the wrong type, a sub-record
//! the exact decoder refuses) makes it give up, and the caller decodes the text the
//! exact way, which also words the error. Where it accepts, the event is the one the
//! exact path builds (tests compare both on every fixture payload and on mutations).
//!
//! The scan's walk asks for less ([`Keep::ForWalk`]): `actions.tokenUsage`, which it
//! reads only for being there, is checked in place against the exact decoder's own
//! field table (the same `Ty` rules, read from the text) and kept as `null`, and so
//! are a function response's `result` and `providerOutput` (any JSON: their grammar).
//! Pure: no I/O.

use super::decode::{
    check_answer_accepted, check_continuation_start, check_permission_decision,
    check_permission_request, check_runtime_protocol, check_token_usage,
    check_user_question_request, check_workspace_fact, decode_actions, decode_content,
    decode_tool_recovery, is_safe_integer, is_sha256_digest, Fields, Ty, ACTION_KEYS, AUTHORS,
    ENVELOPE_KEYS, F, ORIGINS, RECOVERY_MODES, REF_KEYS, ROLES, RUNTIME_PROTOCOL_FIELDS, STATUSES,
    TOKEN_USAGE_FIELDS, TOOL_BOUNDARY_PROTOCOL_V1, VISIBILITIES,
};
use super::key_order::{KeyOrder, MAX_NAMES};
use super::{Actions, Content, Refs, RuntimeEvent, ToolDispatch};
use crate::json::validate::{skip_number, skip_string, skip_value, ws};
use crate::json::{parse_value_at, JsObject, JsStr, Json};

/// What the in-place decoder keeps of values nobody reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Everything, as the exact decoder builds it.
    All,
    /// For the scan's walk, which reads only that `actions.tokenUsage` is there (for
    /// the lane rules) and never a function response's `result` or `providerOutput`:
    /// those are checked in place as Maka checks them and kept as `null`. Building
    /// their trees took about a sixth of the decoder's instructions on the bench
    /// workspace.
    ForWalk,
    /// For the scan's batches: as [`Keep::ForWalk`], and a function call's `args`
    /// whose text is already their identity form (`args_hash::identity_form_end`)
    /// are only checked and kept as `null`, their text handed back for the batch to
    /// hash: nothing else in the walk reads them.
    ForBatch,
}

/// A cursor over one payload text; every step returns `None` to give up.
struct Reader<'a> {
    text: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self, want: u8) -> Option<()> {
        self.i = ws(self.b, self.i);
        (self.b.get(self.i) == Some(&want)).then(|| self.i += 1)
    }

    /// A string without escapes, borrowed from the text.
    fn plain_str(&mut self) -> Option<&'a str> {
        self.i = ws(self.b, self.i);
        let (end, escaped) = skip_string(self.b, self.i)?;
        if escaped {
            return None;
        }
        let s = &self.text[self.i + 1..end - 1];
        self.i = end;
        Some(s)
    }

    fn number(&mut self) -> Option<f64> {
        self.i = ws(self.b, self.i);
        if let Some((n, end)) = short_integer_at(self.b, self.i) {
            self.i = end;
            return Some(n);
        }
        let (end, _) = skip_number(self.b, self.i)?;
        // `str::parse` rounds as `JSON.parse` does (the exact parser's integer shortcut
        // gives the same doubles).
        let n = self.text[self.i..end].parse::<f64>().ok()?;
        self.i = end;
        Some(n)
    }

    fn boolean(&mut self) -> Option<bool> {
        self.i = ws(self.b, self.i);
        let rest = &self.b[self.i..];
        let (value, len) = if rest.starts_with(b"true") {
            (true, 4)
        } else if rest.starts_with(b"false") {
            (false, 5)
        } else {
            return None;
        };
        self.i += len;
        Some(value)
    }

    fn member<T: Copy>(&mut self, domain: &[(&str, T)]) -> Option<T> {
        let k = self.literal(domain.iter().map(|(name, _)| *name))?;
        Some(domain[k].1)
    }

    /// The index of the name in `names` that the string at the cursor spells, without
    /// escapes; `None` for any other string (an escape included) or no string. A name
    /// has neither `"` nor `\\`, so its bytes then a `"` are the whole string: no
    /// need to find the string's end first (most keys and enum values are short).
    fn literal<'n>(&mut self, names: impl Iterator<Item = &'n str>) -> Option<usize> {
        self.i = ws(self.b, self.i);
        let rest = match self.b.get(self.i..) {
            Some([b'"', rest @ ..]) => rest,
            _ => return None,
        };
        for (k, name) in names.enumerate() {
            let n = name.as_bytes();
            if rest.get(n.len()) == Some(&b'"') && rest.starts_with(n) {
                debug_assert!(!n.contains(&b'"') && !n.contains(&b'\\'));
                self.i += n.len() + 2;
                return Some(k);
            }
        }
        None
    }

    /// A string, borrowed when it has no escapes, else decoded as the exact parser does.
    fn string(&mut self) -> Option<JsStr> {
        let start = self.i;
        if let Some(s) = self.plain_str() {
            return Some(JsStr::new(s));
        }
        self.i = start;
        self.value()?.into_js_string().ok()
    }

    fn value(&mut self) -> Option<Json> {
        let (value, end) = parse_value_at(self.text, self.i).ok()?;
        self.i = end;
        Some(value)
    }

    /// A value Maka takes as any JSON (a response's `result`, `providerOutput`): the
    /// tree, or for the walk only its grammar checked and `null`.
    fn open_value(&mut self, keep: Keep) -> Option<Json> {
        match keep {
            Keep::All => self.value(),
            Keep::ForWalk | Keep::ForBatch => {
                self.i = skip_value(self.b, self.i)?;
                Some(Json::Null)
            }
        }
    }

    fn object_value(&mut self) -> Option<JsObject> {
        let start = self.i;
        if let Some(o) = self.flat_object() {
            return Some(o);
        }
        self.i = start;
        self.value()?.into_object().ok()
    }

    /// A small object of strings without escapes and short integers (a `stateDelta`
    /// as Maka writes it: 96,539 on the bench workspace), built without the exact
    /// parser's stacks, as it would build it; `None` for anything else (the caller
    /// then parses it the exact way from the same place).
    fn flat_object(&mut self) -> Option<JsObject> {
        // More members than this are left to the exact parser (repeats are looked
        // for by a pass over the members so far).
        const MOST: usize = 8;
        self.byte(b'{')?;
        let mut o = JsObject::new();
        if self.byte(b'}').is_some() {
            return Some(o);
        }
        loop {
            let key = self.plain_str()?;
            self.byte(b':')?;
            self.i = ws(self.b, self.i);
            let value = if self.b.get(self.i) == Some(&b'"') {
                Json::String(JsStr::new(self.plain_str()?))
            } else {
                let (n, end) = short_integer_at(self.b, self.i)?;
                self.i = end;
                Json::Number(n)
            };
            if o.len() == MOST || o.get(key).is_some() {
                return None;
            }
            o.push_unique(JsStr::new(key), value);
            if self.byte(b'}').is_some() {
                return Some(o);
            }
            self.byte(b',')?;
        }
    }

    /// What [`Reader::object_value`] accepts (any object), checked, not built.
    fn object_skipped(&mut self) -> Option<()> {
        self.i = ws(self.b, self.i);
        if self.b.get(self.i) != Some(&b'{') {
            return None;
        }
        self.i = skip_value(self.b, self.i)?;
        Some(())
    }

    /// An array, each item read by `each`.
    fn array(&mut self, each: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.sequence(b'[', b']', each)
    }

    /// An object with any keys (without escapes), each value read by `each`.
    fn members(&mut self, mut each: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.sequence(b'{', b'}', |r| {
            r.plain_str()?;
            r.byte(b':')?;
            each(r)
        })
    }

    /// `open`, then items read by `each` and separated by commas, then `close`.
    fn sequence(
        &mut self,
        open: u8,
        close: u8,
        mut each: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.byte(open)?;
        self.i = ws(self.b, self.i);
        if self.b.get(self.i) == Some(&close) {
            self.i += 1;
            return Some(());
        }
        loop {
            each(self)?;
            self.i = ws(self.b, self.i);
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(&c) if c == close => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A value read in place by `plain`, or else parsed and given to the exact
    /// decoder (`plain` gave up; its reading is undone).
    fn either<T>(
        &mut self,
        plain: impl FnOnce(&mut Self) -> Option<T>,
        exact: impl FnOnce(Json) -> Result<T, String>,
    ) -> Option<T> {
        let start = self.i;
        if let Some(t) = plain(self) {
            return Some(t);
        }
        self.i = start;
        exact(self.value()?).ok()
    }

    /// The members of an object whose keys all belong to `keys` (`order` is theirs),
    /// each once: `each` is called with the key's index and reads the value. `seen`
    /// has a bit per index.
    fn object<N: Named>(
        &mut self,
        keys: &[N],
        order: &KeyOrder,
        each: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<u32> {
        debug_assert!(keys.len() <= 32);
        let seen: u64 = self.object_of(keys, order, each)?;
        Some(seen as u32)
    }

    /// [`Reader::object`] for as many keys as `S` has bits (at most 128).
    fn object_of<N: Named, S: KeyBits>(
        &mut self,
        keys: &[N],
        order: &KeyOrder,
        mut each: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<S> {
        debug_assert!(keys.len() <= MAX_NAMES.min(S::BITS));
        self.byte(b'{')?;
        let mut seen = S::NONE;
        self.i = ws(self.b, self.i);
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Some(seen);
        }
        // The sorted place after the previous key's: where the next key of an object
        // in Maka's order is.
        let mut next = 0;
        loop {
            let k = self.key(keys, order, &mut next)?;
            if seen.has(k) {
                return None;
            }
            seen = seen.with(k);
            self.byte(b':')?;
            each(self, k)?;
            self.i = ws(self.b, self.i);
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Some(seen);
                }
                _ => return None,
            }
        }
    }

    /// The index in `keys` of the key at the cursor (a string without escapes: no
    /// name has one), looked for from sorted place `next` on, then in the whole table;
    /// `next` becomes the place after it.
    #[inline(always)]
    fn key<N: Named>(&mut self, keys: &[N], order: &KeyOrder, next: &mut usize) -> Option<usize> {
        self.i = ws(self.b, self.i);
        let rest = match self.b.get(self.i..) {
            Some([b'"', rest @ ..]) => rest,
            _ => return None,
        };
        let found = |k: usize| {
            let n = keys[k].name().as_bytes();
            (rest.get(n.len()) == Some(&b'"') && same_bytes(&rest[..n.len()], n)).then_some(n.len())
        };
        let mut p = *next;
        let (k, len) = loop {
            match order.at(p) {
                Some(k) => match found(k) {
                    Some(len) => break (k, len),
                    None => p += 1,
                },
                None => {
                    let (k, len) = (0..keys.len()).find_map(|k| Some((k, found(k)?)))?;
                    p = order.place(k);
                    break (k, len);
                }
            }
        };
        *next = p + 1;
        self.i += len + 2;
        Some(k)
    }
}

/// A set of key indexes, a bit each: a `u64` for the tables of up to 64 names (all but
/// the context budget's), whose tests are a few instructions; with a `u128` for all,
/// its shifts and tests were about one percent of a scan's instructions.
trait KeyBits: Copy {
    const BITS: usize;
    const NONE: Self;
    fn has(self, k: usize) -> bool;
    fn with(self, k: usize) -> Self;
}

impl KeyBits for u64 {
    const BITS: usize = 64;
    const NONE: u64 = 0;
    #[inline(always)]
    fn has(self, k: usize) -> bool {
        self & (1 << k) != 0
    }
    #[inline(always)]
    fn with(self, k: usize) -> u64 {
        self | 1 << k
    }
}

impl KeyBits for u128 {
    const BITS: usize = 128;
    const NONE: u128 = 0;
    #[inline(always)]
    fn has(self, k: usize) -> bool {
        self & (1 << k) != 0
    }
    #[inline(always)]
    fn with(self, k: usize) -> u128 {
        self | 1 << k
    }
}

/// Whether `a` and `b`, of one length, hold the same bytes: a few word compares
/// inline (keys are short; a library call to compare them cost more than the rest of
/// finding the key).
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    debug_assert_eq!(a.len(), b.len());
    let n = a.len().min(b.len());
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8"));
    let half = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().expect("4"));
    if n >= 8 {
        let mut i = 0;
        while i + 8 <= n {
            if word(a, i) != word(b, i) {
                return false;
            }
            i += 8;
        }
        // The last word overlaps the one before: it covers the tail.
        i == n || word(a, n - 8) == word(b, n - 8)
    } else if n >= 4 {
        half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4)
    } else {
        a[..n] == b[..n]
    }
}

/// The integer of at most 15 digits (a `-` first aside) that starts at `i`, as a
/// double, and its end: below 2^53, so exact, as `str::parse` gives it. Most numbers
/// Maka writes (`ts`, counts) are such, and are read in one pass, without finding the
/// number's end first or the general parser. `None` for anything else: then
/// [`skip_number`] and `str::parse` read it.
fn short_integer_at(b: &[u8], i: usize) -> Option<(f64, usize)> {
    let negative = b.get(i) == Some(&b'-');
    let from = i + usize::from(negative);
    let mut j = from;
    let mut v = 0u64;
    while let Some(&d) = b.get(j).filter(|d| d.is_ascii_digit()) {
        v = v * 10 + u64::from(d - b'0');
        j += 1;
        if j - from > 15 {
            return None;
        }
    }
    let n = j - from;
    // No digits, a leading zero, or a fraction or exponent next.
    if n == 0 || (n > 1 && b[from] == b'0') || matches!(b.get(j), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    let v = v as f64;
    Some((if negative { -v } else { v }, j))
}

/// A key table's entry: its name.
trait Named {
    fn name(&self) -> &str;
}

impl Named for &str {
    fn name(&self) -> &str {
        self
    }
}

impl Named for F {
    fn name(&self) -> &str {
        self.0
    }
}

/// The event the exact decoder would build from `text`, when `text` is plain enough to
/// read in place; `None` when it is not (the caller then decodes it the exact way).
pub(super) fn decode_plain(text: &str, keep: Keep) -> Option<RuntimeEvent> {
    decode_plain_with_args(text, keep).map(|(event, _)| event)
}

/// Whether the scan's walk reads `text` in place ([`decode_plain`] under
/// [`Keep::ForWalk`]) rather than the exact way: the tests that measure how often the
/// fast path is taken read it here (the verdict is the same either way).
pub fn reads_in_place_for_walk(text: &str) -> bool {
    decode_plain(text, Keep::ForWalk).is_some()
}

/// [`decode_plain`], and under [`Keep::ForBatch`] the text of a function call's
/// arguments when they were left as `null`.
pub(super) fn decode_plain_with_args(
    text: &str,
    keep: Keep,
) -> Option<(RuntimeEvent, Option<&str>)> {
    let mut raw_args = None;
    let mut r = Reader {
        text,
        b: text.as_bytes(),
        i: 0,
    };
    let mut ids: [Option<JsStr>; 5] = Default::default();
    let mut ts = None;
    let mut partial = None;
    let mut role = None;
    let mut author = None;
    let mut branch = None;
    let mut origin = None;
    let mut model_visibility = None;
    let mut status = None;
    let mut content = None;
    let mut actions = None;
    let mut refs = None;
    // The key order of ENVELOPE_KEYS: id, invocationId, runId, sessionId, turnId, ts,
    // partial, role, author, branch, origin, modelVisibility, status, content,
    // actions, refs.
    const ORDER: KeyOrder = KeyOrder::new(&ENVELOPE_KEYS);
    let seen = r.object(&ENVELOPE_KEYS, &ORDER, |r, k| {
        match k {
            0..=4 => {
                let s = r.plain_str()?;
                if s.is_empty() {
                    return None;
                }
                ids[k] = Some(JsStr::new(s));
            }
            5 => ts = Some(r.number().filter(|n| n.is_finite())?),
            6 => partial = Some(r.boolean()?),
            7 => role = Some(r.member(ROLES)?),
            8 => author = Some(r.member(AUTHORS)?),
            9 => branch = Some(JsStr::new(r.plain_str()?)),
            10 => origin = Some(r.member(ORIGINS)?),
            11 => model_visibility = Some(r.member(VISIBILITIES)?),
            12 => status = Some(r.member(STATUSES)?),
            13 => {
                raw_args = None;
                content =
                    Some(r.either(|r| plain_content(r, keep, &mut raw_args), decode_content)?);
            }
            14 => {
                let exact = |v| decode_actions(v).map(Box::new);
                actions = Some(r.either(|r| plain_actions(r, keep), exact)?);
            }
            15 => refs = Some(plain_refs(r)?),
            _ => return None,
        }
        Some(())
    })?;
    // Only whitespace may follow; every required key must be there.
    if ws(r.b, r.i) != r.b.len() || seen & 0x1ff != 0x1ff {
        return None;
    }
    let [id, invocation_id, run_id, session_id, turn_id] = ids;
    let event = RuntimeEvent {
        id: id?,
        invocation_id: invocation_id?,
        run_id: run_id?,
        session_id: session_id?,
        turn_id: turn_id?,
        ts: ts?,
        partial: partial?,
        role: role?,
        author: author?,
        branch,
        origin,
        model_visibility,
        status,
        content,
        actions,
        refs,
    };
    Some((event, raw_args))
}

/// `thinking`, `function_call` and `function_response` content, and text content with
/// nothing but its text (and `providerOptions`, which the exact decoder drops); other
/// text and error content (normalized or checked in more ways) are left to the exact
/// decoder.
fn plain_content<'a>(
    r: &mut Reader<'a>,
    keep: Keep,
    raw_args: &mut Option<&'a str>,
) -> Option<Content> {
    const KEYS: [&str; 11] = [
        "kind",
        "text",
        "signature",
        "providerOptions",
        "id",
        "name",
        "args",
        "providerExecuted",
        "result",
        "isError",
        "providerOutput",
    ];
    // Each kind's keys, as bits of KEYS, and the ones it requires.
    const THINKING: (u32, u32) = (0b000_0000_1111, 0b000_0000_0011);
    const CALL: (u32, u32) = (0b000_1111_1001, 0b000_0111_0001);
    const RESPONSE: (u32, u32) = (0b111_1011_0001, 0b001_0011_0001);
    const TEXT: (u32, u32) = (0b000_0000_1011, 0b000_0000_0011);
    let mut strings: [Option<&str>; 6] = [None; 6];
    // `text` may hold escapes (new lines, quotes): decoded, not given up on.
    let mut text = None;
    let mut provider_options = None;
    let mut values: [Option<Json>; 3] = Default::default();
    let mut flags: [Option<bool>; 2] = [None; 2];
    let mut args_text = None;
    const ORDER: KeyOrder = KeyOrder::new(&KEYS);
    let seen = r.object(&KEYS, &ORDER, |r, k| {
        match k {
            // Indexes 1 (text) and 3 (providerOptions) stay empty.
            0 | 2 | 4 | 5 => strings[k] = Some(r.plain_str()?),
            1 => text = Some(r.string()?),
            3 => provider_options = Some(r.object_value()?),
            6 => {
                let start = ws(r.b, r.i);
                let end = (keep == Keep::ForBatch)
                    .then(|| crate::args_hash::identity_form_end(r.b, start))
                    .flatten();
                values[0] = Some(match end {
                    Some(end) => {
                        args_text = Some(&r.text[start..end]);
                        r.i = end;
                        Json::Null
                    }
                    None => r.value()?,
                });
            }
            7 => flags[0] = Some(r.boolean()?),
            8 => values[1] = Some(r.open_value(keep)?),
            9 => flags[1] = Some(r.boolean()?),
            10 => values[2] = Some(r.open_value(keep)?),
            _ => return None,
        }
        Some(())
    })?;
    let [kind, _, signature, _, id, name] = strings;
    let [args, result, provider_output] = values;
    let [provider_executed, is_error] = flags;
    let fits =
        |(allowed, required): (u32, u32)| seen & !allowed == 0 && seen & required == required;
    let js = JsStr::new;
    match kind? {
        "text" if fits(TEXT) => {
            let text = text?;
            let mut fields = JsObject::new();
            fields.push_unique(JsStr::new("kind"), Json::String(JsStr::new("text")));
            fields.push_unique(JsStr::new("text"), Json::String(text.clone()));
            Some(Content::Text {
                text,
                steering: false,
                fields,
            })
        }
        "thinking" if fits(THINKING) => Some(Content::Thinking {
            text: text?,
            signature: signature.map(js),
            provider_options,
        }),
        "function_call" if fits(CALL) => {
            let call = Content::FunctionCall {
                id: js(id?),
                name: js(name?),
                args: args?,
                provider_options,
                provider_executed,
            };
            *raw_args = args_text;
            Some(call)
        }
        "function_response" if fits(RESPONSE) => Some(Content::FunctionResponse {
            id: js(id?),
            name: js(name?),
            result: result?,
            is_error,
            provider_executed,
            provider_output,
        }),
        _ => None,
    }
}

/// `actions`: every member but `artifactDelta` and `permissionClosureAccepted` (left to
/// the exact decoder); the records Maka only validates get the exact decoder's checks.
fn plain_actions(r: &mut Reader<'_>, keep: Keep) -> Option<Box<Actions>> {
    // Boxed from the start, as `plain_refs`.
    let mut a = Box::<Actions>::default();
    const ORDER: KeyOrder = KeyOrder::new(&ACTION_KEYS);
    r.object(&ACTION_KEYS, &ORDER, |r, k| {
        type Check = fn(&Json) -> Result<(), String>;
        let kept = |r: &mut Reader<'_>, check: Check| {
            let v = r.value()?;
            check(&v).ok()?;
            Some(v)
        };
        match ACTION_KEYS[k] {
            "stateDelta" => a.state_delta = Some(r.object_value()?),
            "permissionRequest" => {
                a.permission_request = Some(kept(r, check_permission_request)?);
            }
            "permissionDecision" => {
                a.permission_decision = Some(kept(r, check_permission_decision)?);
            }
            "permissionAnswerAccepted" => {
                a.permission_answer_accepted = Some(kept(r, check_answer_accepted)?);
            }
            "userQuestionRequest" => {
                a.user_question_request = Some(kept(r, check_user_question_request)?);
            }
            "userQuestionAnswerAccepted" => {
                a.user_question_answer_accepted = Some(kept(r, check_answer_accepted)?);
            }
            "transferToAgent" => a.transfer_to_agent = Some(JsStr::new(r.plain_str()?)),
            "endInvocation" => a.end_invocation = Some(r.boolean()?),
            "tokenUsage" => {
                a.token_usage = Some(match keep {
                    Keep::All => kept(r, check_token_usage)?,
                    Keep::ForWalk | Keep::ForBatch => {
                        checked(r, Ty::Record(&TOKEN_USAGE_FIELDS))?;
                        Json::Null
                    }
                });
            }
            "toolDispatch" => a.tool_dispatch = Some(plain_dispatch(r)?),
            "toolRecovery" => a.tool_recovery = Some(decode_tool_recovery(r.value()?).ok()?),
            "runtimeProtocol" => a.runtime_protocol = Some(kept(r, check_runtime_protocol)?),
            "continuationStart" => {
                a.continuation_start = Some(kept(r, check_continuation_start)?);
            }
            "workspaceFact" => a.workspace_fact = Some(kept(r, check_workspace_fact)?),
            _ => return None,
        }
        Some(())
    })?;
    Some(a)
}

/// Checks the value at the cursor as the exact decoder's table-driven check of `ty`
/// does, without building it; `None` to give up (anything unusual, and the types not
/// read in place: a digest, a hand-written check).
fn checked(r: &mut Reader<'_>, ty: Ty) -> Option<()> {
    r.i = ws(r.b, r.i);
    let number = |r: &mut Reader<'_>, ok: fn(f64) -> bool| r.number().filter(|n| ok(*n));
    match ty {
        Ty::Any => r.i = skip_value(r.b, r.i)?,
        Ty::Str => r.i = skip_string(r.b, r.i)?.0,
        // Any escape decodes to at least one code unit: empty means `""`.
        Ty::NonEmptyStr => match skip_string(r.b, r.i)? {
            (end, _) if end > r.i + 2 => r.i = end,
            _ => return None,
        },
        Ty::Bool => drop(r.boolean()?),
        Ty::True => r.boolean()?.then_some(())?,
        // Without an exponent and with at most 300 integer digits, a number is finite:
        // no need to convert it.
        Ty::Finite => match skip_number(r.b, r.i)? {
            (end, true) => r.i = end,
            _ => drop(number(r, f64::is_finite)?),
        },
        Ty::SafeIntNonNeg => drop(number(r, |n| is_safe_integer(n) && n >= 0.0)?),
        Ty::SafeIntPos => drop(number(r, |n| is_safe_integer(n) && n > 0.0)?),
        Ty::One => drop(number(r, |n| n == 1.0)?),
        Ty::Zero => drop(number(r, |n| n == 0.0)?),
        Ty::Enum(names) => drop(r.literal(names.iter().copied())?),
        Ty::StrArray => r.array(|r| checked(r, Ty::Str))?,
        // Every member's value is checked, a repeated key's too: stricter than the
        // last one winning, so at worst the exact decoder is asked.
        Ty::StrNumRecord => r.members(|r| checked(r, Ty::Finite))?,
        Ty::Record(fields) => closed(r, fields)?,
        Ty::Records(fields) => r.array(|r| closed(r, fields))?,
        Ty::Sha256 | Ty::Check(_) => return None,
    }
    Some(())
}

/// A closed record of `fields`, checked in place: known keys, each once, the required
/// ones all there, every value of its type.
fn closed(r: &mut Reader<'_>, fields: &Fields) -> Option<()> {
    let each = |r: &mut Reader<'_>, k: usize| checked(r, fields.list[k].2);
    let seen = if fields.list.len() <= 64 {
        u128::from(r.object_of::<_, u64>(fields.list, &fields.order, each)?)
    } else {
        r.object_of::<_, u128>(fields.list, &fields.order, each)?
    };
    (seen & fields.required == fields.required).then_some(())
}

/// `actions.toolDispatch`: six required members, all strings.
fn plain_dispatch(r: &mut Reader<'_>) -> Option<ToolDispatch> {
    const KEYS: [&str; 6] = [
        "protocol",
        "operationId",
        "providerToolCallId",
        "toolName",
        "canonicalArgsHash",
        "recoveryMode",
    ];
    let mut strings: [Option<&str>; 6] = [None; 6];
    const ORDER: KeyOrder = KeyOrder::new(&KEYS);
    let seen = r.object(&KEYS, &ORDER, |r, k| {
        strings[k] = Some(r.plain_str()?);
        Some(())
    })?;
    if seen != 0b11_1111 || strings[0]? != TOOL_BOUNDARY_PROTOCOL_V1 {
        return None;
    }
    let mode = strings[5]?;
    Some(ToolDispatch {
        operation_id: JsStr::new(strings[1]?),
        provider_tool_call_id: JsStr::new(strings[2]?),
        tool_name: JsStr::new(strings[3]?),
        canonical_args_hash: JsStr::new(strings[4]?),
        recovery_mode: RECOVERY_MODES
            .iter()
            .find(|(name, _)| *name == mode)
            .map(|(_, m)| *m)?,
        newer: Default::default(),
    })
}

/// `refs`, whose values are strings but for a digest and a high-water count. Filled
/// where it is kept: built aside and then boxed, its 580 bytes were copied on the way.
/// The slots follow `REF_KEYS`' order (asserted below).
fn plain_refs(r: &mut Reader<'_>) -> Option<Box<Refs>> {
    let mut refs = Box::<Refs>::default();
    const ORDER: KeyOrder = KeyOrder::new(&REF_KEYS);
    r.object(&REF_KEYS, &ORDER, |r, k| {
        let slot = match k {
            0 => &mut refs.stored_message_id,
            1 => &mut refs.trace_event_id,
            2 => &mut refs.tool_call_id,
            3 => &mut refs.provider_event_id,
            4 => &mut refs.source_message_digest,
            5 => &mut refs.provider_request_trace_id,
            6 => &mut refs.artifact_id,
            7 => &mut refs.operation_id,
            8 => &mut refs.parent_tool_call_id,
            9 => &mut refs.parent_operation_id,
            10 => &mut refs.step_id,
            11 => &mut refs.source_invocation_id,
            12 => &mut refs.source_run_id,
            13 => &mut refs.source_turn_id,
            _ => {
                refs.source_runtime_event_high_water =
                    Some(r.number().filter(|n| is_safe_integer(*n) && *n >= 0.0)?);
                return Some(());
            }
        };
        let s = JsStr::new(r.plain_str()?);
        if k == 4 && !is_sha256_digest(&s) {
            return None;
        }
        *slot = Some(s);
        Some(())
    })?;
    Some(refs)
}

// `plain_refs` fills its slots by index: the digest at 4, the high-water count last.
const _: () = {
    assert!(matches!(REF_KEYS[4].as_bytes(), b"sourceMessageDigest"));
    assert!(matches!(
        REF_KEYS[14].as_bytes(),
        b"sourceRuntimeEventHighWater"
    ));
    assert!(REF_KEYS.len() == 15);
};

/// What the scan's walk reads of an event on the ordinary tool-ledger lane that is not
/// terminal (beside the row's own columns): its `ts` and `partial`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ordinary {
    pub ts: f64,
    pub partial: bool,
}

/// `Some` only when `text` decodes, as [`decode_plain`] and the exact decoder decode
/// it, to an event whose identity (`id, invocationId, runId, sessionId, turnId`) is
/// `ids`, on the ordinary lane (no function call or response, no dispatch or recovery
/// fact) and not terminal (no `status`, no `endInvocation: true`): then with its `ts`
/// and `partial`, and nothing built. Most of the events Maka writes that carry no tool
/// fact (text, thinking, token usage) are such; decoding them whole cost allocations
/// for values nobody reads. The checks are [`decode_plain`]'s, member by member; what
/// it would build and check (a status, a function call, a permission record, ...) or
/// give up on, this gives up on, and the caller decodes the text.
pub fn check_ordinary(text: &str, ids: [&str; 5]) -> Option<Ordinary> {
    const ORDER: KeyOrder = KeyOrder::new(&ENVELOPE_KEYS);
    let mut r = Reader {
        text,
        b: text.as_bytes(),
        i: 0,
    };
    let mut ts = None;
    let mut partial = None;
    let seen = r.object(&ENVELOPE_KEYS, &ORDER, |r, k| {
        match k {
            // The identity check compares each with the row's column.
            0..=4 => {
                let s = r.plain_str()?;
                (!s.is_empty() && s == ids[k]).then_some(())?;
            }
            5 => ts = Some(r.number().filter(|n| n.is_finite())?),
            6 => partial = Some(r.boolean()?),
            7 => drop(r.member(ROLES)?),
            8 => drop(r.member(AUTHORS)?),
            9 => drop(r.plain_str()?),
            10 => drop(r.member(ORIGINS)?),
            11 => drop(r.member(VISIBILITIES)?),
            // 12, `status`, can make the event terminal.
            13 => ordinary_content(r)?,
            14 => ordinary_actions(r)?,
            15 => checked_refs(r)?,
            _ => return None,
        }
        Some(())
    })?;
    if ws(r.b, r.i) != r.b.len() || seen & 0x1ff != 0x1ff {
        return None;
    }
    Some(Ordinary {
        ts: ts?,
        partial: partial?,
    })
}

/// Text or thinking content as [`plain_content`] reads it (the same keys, required
/// ones and types), checked in place.
fn ordinary_content(r: &mut Reader<'_>) -> Option<()> {
    const KEYS: [&str; 4] = ["kind", "text", "signature", "providerOptions"];
    const ORDER: KeyOrder = KeyOrder::new(&KEYS);
    let mut kind = None;
    let seen = r.object(&KEYS, &ORDER, |r, k| {
        match k {
            0 => kind = Some(r.member(&[("text", false), ("thinking", true)])?),
            1 => r.i = skip_string(r.b, ws(r.b, r.i))?.0,
            2 => drop(r.plain_str()?),
            _ => r.object_skipped()?,
        }
        Some(())
    })?;
    // Kind and text required; a signature only on thinking.
    (seen & 0b11 == 0b11 && (kind? || seen & 0b100 == 0)).then_some(())
}

/// `actions` as [`plain_actions`] reads them, for the members an ordinary event
/// carries (a state delta, token usage, the runtime protocol, a transfer, an
/// `endInvocation` that is not `true`), checked in place; any other member is left to
/// the decoder.
fn ordinary_actions(r: &mut Reader<'_>) -> Option<()> {
    const ORDER: KeyOrder = KeyOrder::new(&ACTION_KEYS);
    r.object(&ACTION_KEYS, &ORDER, |r, k| {
        match ACTION_KEYS[k] {
            "stateDelta" => r.object_skipped()?,
            "tokenUsage" => checked(r, Ty::Record(&TOKEN_USAGE_FIELDS))?,
            "runtimeProtocol" => checked(r, Ty::Record(&RUNTIME_PROTOCOL_FIELDS))?,
            "transferToAgent" => drop(r.plain_str()?),
            "endInvocation" => (!r.boolean()?).then_some(())?,
            _ => return None,
        }
        Some(())
    })
    .map(drop)
}

/// `refs` as [`plain_refs`] reads them, checked in place.
fn checked_refs(r: &mut Reader<'_>) -> Option<()> {
    const ORDER: KeyOrder = KeyOrder::new(&REF_KEYS);
    r.object(&REF_KEYS, &ORDER, |r, k| {
        match REF_KEYS[k] {
            "sourceRuntimeEventHighWater" => {
                r.number().filter(|n| is_safe_integer(*n) && *n >= 0.0)?;
            }
            "sourceMessageDigest" => is_sha256_digest(&JsStr::new(r.plain_str()?)).then_some(())?,
            _ => drop(r.plain_str()?),
        }
        Some(())
    })
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::{checked, decode_plain, decode_plain_with_args, short_integer_at, Keep, Reader};
    use crate::event::decode::{check_ty, Ty, TOKEN_USAGE_FIELDS};
    use crate::event::Content;
    use crate::event::{decode_event_text_exact, RuntimeEvent};
    use crate::json::Json;

    /// Both in-place modes against the exact decoder on one text: whatever either
    /// accepts, the exact decoder accepts, as the same event (but for the values the
    /// walk's mode empties; where it gave up on one, `actions` came from the exact
    /// decoder, whole). Returns whether the walk's mode checked a token usage in place.
    fn agree(text: &str) -> bool {
        let exact = decode_event_text_exact(text);
        if let Some(e) = decode_plain(text, Keep::All) {
            assert_eq!(exact.as_ref(), Ok(&e), "{text}");
        }
        let walk = decode_plain(text, Keep::ForWalk);
        if let Some(w) = &walk {
            assert_eq!(
                exact.clone().map(RuntimeEvent::with_unread_emptied),
                Ok(w.clone().with_unread_emptied()),
                "{text}"
            );
        }
        // The batches' mode: the walk's event, but for arguments left as their text,
        // which hashes as the exact event's arguments do.
        match decode_plain_with_args(text, Keep::ForBatch) {
            Some((mut b, raw)) => {
                let w = walk
                    .as_ref()
                    .expect("the batches' mode reads what the walk's does");
                if let Some(raw) = raw {
                    let Some(Content::FunctionCall { name, args, .. }) = &mut b.content else {
                        panic!("arguments without a call: {text}");
                    };
                    assert_eq!(*args, Json::Null, "{text}");
                    let Ok(RuntimeEvent {
                        content: Some(Content::FunctionCall { args: want, .. }),
                        ..
                    }) = &exact
                    else {
                        panic!("{text}");
                    };
                    assert_eq!(
                        crate::args_hash::hash_of_identity_form(name, raw),
                        crate::args_hash::canonical_tool_args_hash(name, want),
                        "{text}"
                    );
                    *args = want.clone();
                }
                assert_eq!(&b, w, "{text}");
            }
            None => assert!(walk.is_none(), "{text}"),
        }
        walk.and_then(|w| w.actions?.token_usage) == Some(Json::Null)
    }

    /// The one-pass integer agrees with reading the number's end and parsing its
    /// text, and leaves everything else (fractions, exponents, long or malformed
    /// numbers) to them.
    #[test]
    fn a_short_integer_reads_as_the_number_it_spells() {
        let cases = [
            "0",
            "-0",
            "7",
            "-7",
            "10",
            "1756713600538",
            "999999999999999",
            "-999999999999999",
            "1000000000000000",
            "9007199254740993",
            "01",
            "-",
            "-01",
            "1.5",
            "1e3",
            "1E3",
            "12.",
            "2,",
            "3}",
            "4]",
            "5 ",
            "",
            "x",
            "-x",
            "00",
        ];
        for text in cases {
            for tail in ["", ",", "}"] {
                let b = format!("{text}{tail}");
                let fast = short_integer_at(b.as_bytes(), 0);
                let slow = crate::json::validate::skip_number(b.as_bytes(), 0)
                    .and_then(|(end, _)| Some((b[..end].parse::<f64>().ok()?, end)));
                match fast {
                    Some((n, end)) => {
                        let (m, e) = slow.expect(&b);
                        assert_eq!((n.to_bits(), end), (m.to_bits(), e), "{b}");
                    }
                    // Left to the slow path: a fraction, an exponent, more than 15
                    // digits, or not a number at all.
                    None => assert!(
                        slow.is_none_or(|(_, end)| {
                            let n = &b[..end];
                            n.trim_start_matches('-').len() > 15 || n.contains(['.', 'e', 'E'])
                        }),
                        "{b}"
                    ),
                }
            }
        }
        let text = "[1756713600538,-3,2.5]";
        let mut r = Reader {
            text,
            b: text.as_bytes(),
            i: 1,
        };
        assert_eq!(r.number(), Some(1756713600538.0));
        r.i += 1;
        assert_eq!(r.number(), Some(-3.0));
        r.i += 1;
        assert_eq!(r.number(), Some(2.5));
    }

    /// An object read by the small-object path is the one the exact parser builds,
    /// to the same place, and whatever that path declines still reads the exact way.
    #[test]
    fn a_small_object_is_built_as_the_exact_parser_builds_it() {
        let cases = [
            r#"{}"#,
            r#"{ }"#,
            r#"{"durationMs":25}"#,
            r#"{"activityKind":"read","displayName":"Read file"}"#,
            r#" { "a" : "x" , "b" : -0 } "#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":"x","b":"y","a":"z"}"#,
            r#"{"a":1.5}"#,
            r#"{"a":1e3}"#,
            r#"{"a":01}"#,
            r#"{"a":1756713600538,"b":9007199254740993}"#,
            r#"{"a":"line\nbreak"}"#,
            r#"{"k\u0065y":1}"#,
            r#"{"a":true,"b":null}"#,
            r#"{"a":{"b":1}}"#,
            r#"{"a":[1]}"#,
            r#"{"__proto__":"x"}"#,
            r#"{"1":1,"0":0}"#,
            r#"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8}"#,
            r#"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}"#,
            r#"{"a":1,}"#,
            r#"{"a":1"#,
            r#"{"a" 1}"#,
            r#"{"a":1]"#,
            r#"{"a":-}"#,
            r#"{"a":"x"x}"#,
            r#"{"#,
            r#"[]"#,
            r#""x""#,
        ];
        let mut built = 0;
        for text in cases {
            let exact = crate::json::parse_value_at(text, 0)
                .ok()
                .and_then(|(v, end)| Some((v.into_object().ok()?, end)));
            let mut r = Reader {
                text,
                b: text.as_bytes(),
                i: 0,
            };
            let got = r.object_value().map(|o| (o, r.i));
            assert_eq!(got, exact, "{text}");
            let mut r = Reader {
                text,
                b: text.as_bytes(),
                i: 0,
            };
            if let Some(o) = r.flat_object() {
                assert_eq!(Some((o, r.i)), exact, "{text}");
                built += 1;
            }
        }
        // The empty objects, the two deltas, the spaced one, `__proto__`, the
        // index-like keys and eight members (not nine, not a repeat, not 16 digits).
        assert_eq!(built, 8);
    }

    #[test]
    fn what_is_read_in_place_is_what_the_exact_decoder_builds() {
        let payloads = crate::fixture_dbs::payloads();
        assert!(payloads.len() > 500, "{} payloads", payloads.len());
        let mut accepted = 0;
        let mut decodable = 0;
        let mut declined = 0;
        let mut raw_args = 0;
        let mut damage = crate::mutate::Mutator::new(0x2545_f491_4f6c_dd1d);
        for p in &payloads {
            let exact = decode_event_text_exact(p);
            decodable += usize::from(exact.is_ok());
            if let Some(e) = decode_plain(p, Keep::All) {
                accepted += 1;
                assert_eq!(exact.as_ref(), Ok(&e), "{p}");
            }
            agree(p);
            raw_args += usize::from(
                decode_plain_with_args(p, Keep::ForBatch).is_some_and(|(_, a)| a.is_some()),
            );
            for _ in 0..40 {
                let Some(m) = damage.mutate(p) else {
                    continue;
                };
                if decode_plain(&m, Keep::All).is_none() {
                    declined += 1;
                }
                agree(&m);
            }
        }
        // The in-place path is the usual one, and most damage sends it to the exact one.
        assert!(
            accepted * 10 >= decodable * 9,
            "{accepted} of {decodable} decodable payloads"
        );
        assert!(declined > payloads.len() * 20, "{declined}");
        // Calls whose arguments the batches hash as written.
        assert!(raw_args > 50, "{raw_args}");
    }

    #[test]
    fn anything_unusual_is_left_to_the_exact_decoder() {
        const OK: &str = r#"{"id":"e1","invocationId":"i1","runId":"i1","sessionId":"s1",
            "turnId":"t1","ts":17,"partial":false,"role":"model","author":"agent",
            "refs":{"toolCallId":"c1"},"content":{"kind":"thinking","text":"hm"}}"#;
        let plain = decode_plain(OK, Keep::All).expect("plain");
        assert_eq!(decode_event_text_exact(OK), Ok(plain.clone()));
        // A repeated key takes its last value in `JSON.parse`: left to the exact path.
        let repeated = OK.replace(r#""ts":17"#, r#""ts":"x","ts":17"#);
        assert_eq!(decode_plain(&repeated, Keep::All), None);
        assert_eq!(decode_event_text_exact(&repeated), Ok(plain.clone()));
        // An escape in an id.
        let escaped = OK.replace(r#""s1""#, r#""s\u0031""#);
        assert_eq!(decode_plain(&escaped, Keep::All), None);
        assert_eq!(decode_event_text_exact(&escaped), Ok(plain));
        // Refused either way: unknown key, empty id, bad enum, trailing text, bad refs.
        for bad in [
            OK.replace(r#""ts":17"#, r#""ts":17,"extra":1"#),
            OK.replace(r#""id":"e1""#, r#""id":"""#),
            OK.replace(r#""model""#, r#""Model""#),
            format!("{OK} x"),
            OK.replace(r#""c1""#, "1"),
            OK.replace(r#""ts":17"#, r#""ts":1e400"#),
            OK.replace(
                r#""refs":{"#,
                r#""refs":{"sourceMessageDigest":"sha256:0","#,
            ),
        ] {
            assert_eq!(decode_plain(&bad, Keep::All), None, "{bad}");
            assert!(decode_event_text_exact(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn text_content_with_only_its_text_is_read_in_place() {
        const TEXT: &str = r#"{"id":"e1","invocationId":"i1","runId":"i1","sessionId":"s1",
            "turnId":"t1","ts":17,"partial":false,"role":"user","author":"user",
            "content":{"kind":"text","text":"a\nb \"c\" \ud800"}}"#;
        let read = |v: &str| (decode_plain(v, Keep::All), decode_event_text_exact(v));
        // Escapes in the text (a lone surrogate too) are decoded, not given up on.
        let (plain, exact) = read(TEXT);
        assert!(plain.is_some());
        assert_eq!(exact, Ok(plain.unwrap()));
        // providerOptions is dropped by both; when not an object, refused by both.
        let with_options = TEXT.replace(
            r#""kind":"text","#,
            r#""kind":"text","providerOptions":{"a":1},"#,
        );
        let (plain, exact) = read(&with_options);
        assert_eq!(exact, Ok(plain.expect("plain")));
        let bad_options =
            TEXT.replace(r#""kind":"text","#, r#""kind":"text","providerOptions":1,"#);
        assert_eq!(read(&bad_options).0, None);
        assert!(read(&bad_options).1.is_err());
        // Every other text member is the exact decoder's (normalized or checked there):
        // the content is then decoded the exact way, with the same result.
        for extra in [
            r#""displayText":"x""#,
            r#""steering":true"#,
            r#""attachments":[]"#,
            r#""quotes":[]"#,
            r#""origin":{"kind":"goal","goalId":"g"}"#,
            r#""signature":"s""#,
        ] {
            let v = TEXT.replace(r#""kind":"text","#, &format!(r#""kind":"text",{extra},"#));
            let (plain, exact) = read(&v);
            assert_eq!(plain, exact.ok(), "{v}");
        }
        // A text that is not a string, or no text.
        assert_eq!(
            read(&TEXT.replace(r#""text":"a"#, r#""text":1,"x":"a"#)).0,
            None
        );
        let no_text = r#"{"id":"e1","invocationId":"i1","runId":"i1","sessionId":"s1",
            "turnId":"t1","ts":17,"partial":false,"role":"user","author":"user",
            "content":{"kind":"text"}}"#;
        assert_eq!(read(no_text).0, None);
        assert!(read(no_text).1.is_err());
    }

    #[test]
    fn content_and_actions_follow_the_exact_decoder_key_by_key() {
        const CALL: &str = r#"{"id":"e1","invocationId":"i1","runId":"i1","sessionId":"s1",
            "turnId":"t1","ts":17,"partial":false,"role":"model","author":"agent",
            "content":{"args":{"path":"a"},"id":"c1","kind":"function_call","name":"Read"},
            "actions":{"stateDelta":{"k":1},"toolDispatch":{"canonicalArgsHash":"h",
            "operationId":"op","protocol":"t1_after_preflight_v1","providerToolCallId":"c1",
            "recoveryMode":"replay_safe","toolName":"Read"}}}"#;
        assert!(decode_plain(CALL, Keep::All).is_some());
        let variants = [
            // Keys of another kind, a missing required key, wrong types.
            CALL.replace(r#""name":"Read"}"#, r#""name":"Read","text":"x"}"#),
            CALL.replace(r#""name":"Read"}"#, r#""name":"Read","result":1}"#),
            CALL.replace(r#""args":{"path":"a"},"#, ""),
            CALL.replace(r#""kind":"function_call""#, r#""kind":"thinking""#),
            CALL.replace(r#""kind":"function_call""#, r#""kind":"function_response""#),
            CALL.replace(r#""kind":"function_call""#, r#""kind":"text""#),
            CALL.replace(
                r#""name":"Read"}"#,
                r#""name":"Read","providerExecuted":1}"#,
            ),
            CALL.replace(
                r#""name":"Read"}"#,
                r#""name":"Read","providerOptions":[]}"#,
            ),
            CALL.replace(
                r#""name":"Read"}"#,
                r#""name":"Read","providerOptions":{}}"#,
            ),
            // Dispatch: another protocol or mode, a missing or empty member.
            CALL.replace("t1_after_preflight_v1", "t2"),
            CALL.replace("replay_safe", "replay"),
            CALL.replace(r#""toolName":"Read""#, r#""toolName":"""#),
            CALL.replace(r#","toolName":"Read""#, ""),
            // Members the in-place reader leaves to the exact decoder, and bad ones.
            CALL.replace(r#""stateDelta":{"k":1}"#, r#""artifactDelta":{"k":1}"#),
            CALL.replace(r#""stateDelta":{"k":1}"#, r#""artifactDelta":{"k":[]}"#),
            CALL.replace(r#""stateDelta":{"k":1}"#, r#""endInvocation":true"#),
            CALL.replace(r#""stateDelta":{"k":1}"#, r#""endInvocation":1"#),
            CALL.replace(r#""stateDelta":{"k":1}"#, r#""stateDelta":[1]"#),
            CALL.replace(
                r#""stateDelta":{"k":1}"#,
                r#""permissionClosureAccepted":{}"#,
            ),
            CALL.replace(r#""stateDelta":{"k":1}"#, r#""runtimeProtocol":{"x":1}"#),
            CALL.replace(
                r#""stateDelta":{"k":1}"#,
                r#""runtimeProtocol":{"toolBoundary":"t1_after_preflight_v1"}"#,
            ),
            CALL.replace(
                r#""stateDelta":{"k":1}"#,
                r#""transferToAgent":"a
""#,
            ),
        ];
        let mut accepted = 0;
        for v in &variants {
            let exact = decode_event_text_exact(v);
            // Declined ones are the exact decoder's to accept or refuse.
            if let Some(e) = decode_plain(v, Keep::All) {
                accepted += 1;
                assert_eq!(exact, Ok(e), "{v}");
            }
        }
        assert!(accepted >= 4, "{accepted}");
        // These Maka refuses (so they were never accepted in place).
        for bad in [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 14, 16, 17, 18, 19] {
            assert!(
                decode_event_text_exact(&variants[bad]).is_err(),
                "{}",
                variants[bad]
            );
        }
    }

    const USAGE: &str = r#"{"id":"e1","invocationId":"i1","runId":"i1","sessionId":"s1",
        "turnId":"t1","ts":17,"partial":false,"role":"system","author":"system",
        "actions":{"tokenUsage":{"input":3600,"output":192,"cacheMissInputSource":"explicit",
        "prefixChangeReason":"stable","prefixHash":"sha256:2","promptSegments":[
        {"chars":0,"estimatedTokens":0,"kind":"system_prompt"},
        {"chars":638,"estimatedTokens":160,"kind":"tool_schema","toolCount":3}],
        "contextBudget":{"enabled":true,"estimatedTokensBefore":1,"estimatedTokensAfter":1,
        "keptTurns":1,"droppedTurns":0,"keptEvents":2,"droppedEvents":0,
        "archivePlaceholderReasonCounts":{"a":1,"b":2.5}},"total":3792}}}"#;

    #[test]
    fn token_usage_is_checked_in_place_for_the_walk_as_maka_checks_it() {
        // Maka's record, plain: read in place, and kept as `null` for the walk only.
        assert!(agree(USAGE));
        let walk = decode_plain(USAGE, Keep::ForWalk).unwrap();
        assert_eq!(walk.actions.unwrap().token_usage, Some(Json::Null));
        let all = decode_plain(USAGE, Keep::All).unwrap();
        assert!(all
            .actions
            .unwrap()
            .token_usage
            .unwrap()
            .as_object()
            .is_some());
        let variants = [
            // Refused by Maka: a missing required member, an unknown one, wrong types,
            // a value outside its enum, a bad segment, a bad budget.
            (r#""input":3600,"#, ""),
            (r#""total":3792"#, r#""total":3792,"extra":1"#),
            (r#""output":192"#, r#""output":"192""#),
            (r#""total":3792"#, r#""total":1e400"#),
            (r#""explicit""#, r#""implicit""#),
            (r#""kind":"system_prompt""#, r#""kind":"other""#),
            (r#""chars":0,"#, ""),
            (r#""toolCount":3"#, r#""toolCount":3,"x":1"#),
            (r#""enabled":true"#, r#""enabled":1"#),
            (r#""keptTurns":1,"#, ""),
            (r#""b":2.5"#, r#""b":"2.5""#),
            (r#""promptSegments":["#, r#""promptSegments":[1,"#),
            (r#""prefixHash":"sha256:2""#, r#""prefixHash":2"#),
            // Accepted by Maka, but not read in place: an escape in an enum value, a
            // repeated key (the last one wins), an escaped key.
            (r#""stable""#, r#""st\u0061ble""#),
            (r#""total":3792"#, r#""total":"x","total":3792"#),
            (r#""b":2.5"#, r#""b":"x","b":2.5"#),
            (r#""total":3792"#, r#""tot\u0061l":3792"#),
            // Accepted by Maka and read in place: other numbers, escapes in a free
            // string, an empty array and record, white space.
            (r#""total":3792"#, r#""total":-0.5e2"#),
            (r#""prefixHash":"sha256:2""#, r#""prefixHash":"a\n\ud800""#),
            (r#""promptSegments":["#, r#""promptSegments":[],"x":["#),
            (r#""a":1,"b":2.5"#, ""),
            (r#""output":192"#, " \"output\" :\n192 "),
        ];
        let mut read = 0;
        let mut refused = 0;
        for (from, to) in variants {
            assert_eq!(USAGE.matches(from).count(), 1, "{from}");
            let v = USAGE.replace(from, to);
            read += usize::from(agree(&v));
            refused += usize::from(decode_event_text_exact(&v).is_err());
        }
        // The `x` key of one variant is unknown: it is refused as well.
        assert_eq!(refused, 14, "refused");
        assert_eq!(read, 4, "read in place");
        // And byte-level damage anywhere in it.
        let mut damage = crate::mutate::Mutator::new(0x9e37_79b9_7f4a_7c15);
        let mut read = 0;
        for _ in 0..3000 {
            if let Some(m) = damage.mutate(USAGE) {
                read += usize::from(agree(&m));
            }
        }
        assert!(read > 200, "{read}");
    }

    #[test]
    fn a_response_result_is_only_checked_for_the_walk() {
        const RESPONSE: &str = r#"{"id":"e1","invocationId":"i1","runId":"i1",
            "sessionId":"s1","turnId":"t1","ts":17,"partial":false,"role":"user",
            "author":"user","content":{"kind":"function_response","id":"c1","name":"Read",
            "result":{"ok":[1,"two",{"x":null}],"e":"\u00e9"},"providerOutput":[true]}}"#;
        let walk = decode_plain(RESPONSE, Keep::ForWalk).expect("read in place");
        let Some(crate::event::Content::FunctionResponse {
            result,
            provider_output,
            ..
        }) = &walk.content
        else {
            panic!("{walk:?}");
        };
        assert_eq!((result, provider_output), (&Json::Null, &Some(Json::Null)));
        assert!(decode_plain(RESPONSE, Keep::All).is_some());
        agree(RESPONSE);
        let mut refused = 0;
        for (from, to) in [
            (r#"[1,"two""#, r#"[1,,"two""#),
            (r#""e":"\u00e9""#, r#""e":"\u00g9""#),
            (r#"{"x":null}"#, r#"{"x":nul}"#),
            (r#"[true]"#, r#"[true"#),
            (r#","providerOutput":[true]"#, ""),
            (r#""result":"#, r#""results":"#),
        ] {
            let v = RESPONSE.replace(from, to);
            assert_ne!(v, RESPONSE);
            agree(&v);
            refused += usize::from(decode_event_text_exact(&v).is_err());
            assert_eq!(
                decode_plain(&v, Keep::ForWalk).is_some(),
                decode_event_text_exact(&v).is_ok(),
                "{v}"
            );
        }
        assert_eq!(refused, 5);
        let mut damage = crate::mutate::Mutator::new(0x2545_f491_4f6c_dd1d);
        for _ in 0..3000 {
            if let Some(m) = damage.mutate(RESPONSE) {
                agree(&m);
            }
        }
    }

    #[test]
    fn each_type_is_checked_in_place_as_the_exact_check_does() {
        let values = [
            "null",
            "true",
            "false",
            "0",
            "-0",
            "1",
            "2",
            "1.5",
            "-3",
            "1e400",
            "9007199254740993",
            r#""""#,
            r#""a""#,
            r#""\u0061""#,
            r#""sha256:00""#,
            r#""off""#,
            "[]",
            r#"["a","b"]"#,
            r#"["a",1]"#,
            "{}",
            r#"{"a":1,"b":-2}"#,
            r#"{"a":"1"}"#,
            r#"{"a\u0062":1}"#,
            r#"[{"kind":"x"}]"#,
            "[1",
            r#"{"a":1"#,
            r#""tab	""#,
            "1e2",
            "-1.5E-3",
            "01",
            "1.",
            "-",
        ];
        let long = "9".repeat(301);
        let longer = "9".repeat(309);
        let values: Vec<&str> = values.into_iter().chain([&*long, &*longer]).collect();
        const FIELDS: crate::event::decode::Fields = crate::event::decode::Fields::new(&[
            crate::event::decode::F("a", true, Ty::Finite),
            crate::event::decode::F("b", false, Ty::Finite),
        ]);
        let types = [
            Ty::Any,
            Ty::Str,
            Ty::NonEmptyStr,
            Ty::Bool,
            Ty::True,
            Ty::Finite,
            Ty::SafeIntNonNeg,
            Ty::SafeIntPos,
            Ty::One,
            Ty::Zero,
            Ty::Enum(&["off", "a"]),
            Ty::StrArray,
            Ty::StrNumRecord,
            Ty::Record(&FIELDS),
            Ty::Records(&FIELDS),
        ];
        let mut read = 0;
        for ty in types {
            for &v in &values {
                let v: &str = v;
                let mut r = Reader {
                    text: v,
                    b: v.as_bytes(),
                    i: 0,
                };
                let exact = crate::json::parse(v).ok().map(|j| check_ty(&j, ty).is_ok());
                if checked(&mut r, ty).is_some() && r.i == v.len() {
                    read += 1;
                    assert_eq!(exact, Some(true), "{v}");
                } else if exact == Some(true) {
                    // Given up: only for what the in-place reader leaves to the exact one.
                    assert!(v.contains('\\') || v.contains("1e400"), "{v}");
                }
            }
        }
        assert!(read >= 45, "{read}");
        let _ = TOKEN_USAGE_FIELDS;
    }
}

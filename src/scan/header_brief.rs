//! [`HeaderBrief`]: a run header reduced, compactly, to what classifying its run reads,
//! kept per run for the whole walk so that a plainly terminal run needs no lookup.

use crate::header::{HeaderFacts, RunHeader};

/// A run header that decodes, reduced to the fields the run classification reads
/// (the row's session and run are its key). Kept per run for the whole walk by a
/// store that reads `core_agent_runs` once, so that a plainly terminal run needs no
/// header lookup; any other run is assessed again from the looked-up row.
///
/// Stored compactly, since one is kept per run for the whole scan: a turn id that is
/// a lowercase hyphenated UUID (Maka's) as its 16 bytes, any other in `text`; `text`
/// also holds the failure class and the abort source (usually absent, so usually
/// nothing is allocated); `lens` their byte lengths, `u32::MAX` for absent.
#[derive(Clone, Debug)]
pub struct HeaderBrief {
    /// The turn id's 16 bytes, when `extra` does not hold the turn id.
    uuid: [u8; 16],
    /// Text that does not fit the fixed fields (absent for most runs: 8 bytes then).
    extra: Option<Box<BriefText>>,
    status: crate::header::HeaderStatus,
}

/// The text of a [`HeaderBrief`]: `text` holds, one after the other, a turn id that is
/// not a lowercase UUID, the failure class and the abort source; `lens` are their byte
/// lengths, `u32::MAX` for absent.
#[derive(Clone, Debug)]
struct BriefText {
    text: Box<str>,
    lens: [u32; 3],
}

/// A lowercase hyphenated UUID's 16 bytes.
fn uuid_bytes(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let mut out = [0u8; 16];
    let mut digits = b.iter().filter(|&&c| c != b'-');
    for byte in &mut out {
        let mut v = 0u8;
        for _ in 0..2 {
            let c = *digits.next()?;
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                _ => return None,
            };
            v = (v << 4) | d;
        }
        *byte = v;
    }
    Some(out)
}

fn uuid_text(bytes: &[u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(36);
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 15)]));
    }
    s
}

impl HeaderBrief {
    /// `None` for a header whose fields do not fit (longer than 4 GiB).
    pub fn new(h: &RunHeader) -> Option<HeaderBrief> {
        HeaderBrief::from_facts(h.facts())
    }

    /// The brief of a header with these facts (see [`crate::header::header_facts_plainly`]).
    pub fn from_facts(h: HeaderFacts<'_>) -> Option<HeaderBrief> {
        let uuid = uuid_bytes(h.turn_id);
        let parts = [
            uuid.is_none().then_some(h.turn_id),
            h.failure_class,
            h.abort_source,
        ];
        let extra = if parts.iter().all(Option::is_none) {
            None
        } else {
            let mut text = String::new();
            let mut lens = [u32::MAX; 3];
            for (len, part) in lens.iter_mut().zip(parts) {
                if let Some(p) = part {
                    *len = u32::try_from(p.len()).ok().filter(|&n| n != u32::MAX)?;
                    text.push_str(p);
                }
            }
            Some(Box::new(BriefText {
                text: text.into_boxed_str(),
                lens,
            }))
        };
        Some(HeaderBrief {
            uuid: uuid.unwrap_or_default(),
            extra,
            status: h.status,
        })
    }

    /// The header's `turnId`.
    pub fn turn_id(&self) -> String {
        match self.parts()[0] {
            Some(text) => text.to_owned(),
            None => uuid_text(&self.uuid),
        }
    }

    fn parts(&self) -> [Option<&str>; 3] {
        let Some(extra) = &self.extra else {
            return [None; 3];
        };
        let mut at = 0usize;
        extra.lens.map(|len| {
            (len != u32::MAX).then(|| {
                let p = &extra.text[at..at + len as usize];
                at += len as usize;
                p
            })
        })
    }

    /// A header with these fields and nothing else (enough for
    /// [`runs::assess_header_run`]).
    pub(super) fn header(&self, session_id: &str, run_id: &str) -> RunHeader {
        let [_, failure_class, abort_source] = self.parts();
        RunHeader {
            run_id: run_id.to_owned(),
            session_id: session_id.to_owned(),
            turn_id: self.turn_id(),
            invocation_id: None,
            status: self.status,
            created_at: 0.0,
            updated_at: 0.0,
            completed_at: None,
            failure_class: failure_class.map(str::to_owned),
            abort_source: abort_source.map(str::to_owned),
            tool_mode: None,
            trace_write_error: None,
            record: serde_json::Map::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{uuid_bytes, uuid_text, HeaderBrief};
    use crate::header::{HeaderStatus, RunHeader};

    #[test]
    fn a_brief_gives_back_the_fields_it_keeps_in_32_bytes() {
        // One is kept per run for the whole scan.
        assert!(std::mem::size_of::<HeaderBrief>() <= 32);
        let header = |turn: &str, failure: Option<&str>, abort: Option<&str>| RunHeader {
            run_id: "r".into(),
            session_id: "s".into(),
            turn_id: turn.into(),
            invocation_id: None,
            status: HeaderStatus::Failed,
            created_at: 1.0,
            updated_at: 2.0,
            completed_at: None,
            failure_class: failure.map(Into::into),
            abort_source: abort.map(Into::into),
            tool_mode: None,
            trace_write_error: None,
            record: serde_json::Map::new(),
        };
        let uuid = "08790f99-7301-4f31-8f22-9f6a34e8a5fc";
        for (turn, failure, abort) in [
            (uuid, None, None),
            (uuid, Some("provider_error"), None),
            (uuid, None, Some("user")),
            ("turn-1", None, None),
            ("turn-1", Some("x"), Some("")),
            ("", Some(""), None),
        ] {
            let b = HeaderBrief::new(&header(turn, failure, abort)).unwrap();
            assert_eq!(
                b.extra.is_none(),
                turn == uuid && failure.is_none() && abort.is_none()
            );
            assert_eq!(b.turn_id(), turn);
            let back = b.header("s", "r");
            assert_eq!(back.turn_id, turn);
            assert_eq!(back.failure_class.as_deref(), failure);
            assert_eq!(back.abort_source.as_deref(), abort);
            assert_eq!(back.status, HeaderStatus::Failed);
        }
    }

    #[test]
    fn a_uuid_turn_id_is_kept_as_bytes_and_comes_back_the_same() {
        let id = "08790f99-7301-4f31-8f22-9f6a34e8a5fc";
        let b = uuid_bytes(id).unwrap();
        assert_eq!(b[0], 0x08);
        assert_eq!(b[15], 0xfc);
        assert_eq!(uuid_text(&b), id);
        // Anything that would not come back byte for byte stays text.
        for other in [
            "08790F99-7301-4f31-8f22-9f6a34e8a5fc",
            "08790f99a7301-4f31-8f22-9f6a34e8a5fc",
            "08790f99-7301-4f31-8f22-9f6a34e8a5f",
            "08790f99-7301-4f31-8f22-9f6a34e8a5fcd",
            "08790f99-7301-4f31-8f22-9f6a34e8a5fg",
            "{8790f99-7301-4f31-8f22-9f6a34e8a5f}",
            "",
        ] {
            assert_eq!(uuid_bytes(other), None, "{other}");
        }
    }
}

//! `wsledger explain`.

use clap::Args;

use super::{CliError, ExitStatus, Printer};
use crate::diagnosis::{CAUSE_ADVICE, CAUSE_CODES, PRODUCERS};
use crate::findings::{code_info, explain_text, CODES};

/// Explain a code: a finding's (what it means, why it matters to Maka, how it
/// usually happens and what to do), a replay divergence's or note's, or a cause's or
/// producer's of the diagnosis.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The code, e.g. `orphan_response` or `latched_ledger_corruption`
    #[arg(value_name = "CODE", required_unless_present = "list")]
    pub code: Option<String>,
    /// List every code with its severity (or kind) and one-line meaning
    #[arg(long)]
    pub list: bool,
}

/// Replay's divergence and note codes that are not also finding codes:
/// `(code, "replay" | "note", meaning)`.
pub fn replay_codes() -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
    let div = crate::replay::DIVERGENCE_CODES
        .iter()
        .map(|(c, t)| (*c, "replay", *t));
    let note = crate::replay::NOTE_CODES
        .iter()
        .map(|(c, t)| (*c, "note", *t));
    div.chain(note).filter(|(c, _, _)| code_info(c).is_none())
}

/// The diagnosis's cause and producer codes (`diagnosis.causes[].code`,
/// `damaged_sessions[].reasons[].producer.code`): `(code, "cause" | "producer",
/// meaning)`.
pub fn diagnosis_codes() -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
    let causes = CAUSE_CODES.iter().map(|(c, t)| (*c, "cause", *t));
    let producers = PRODUCERS.iter().map(|(c, t)| (*c, "producer", *t));
    causes.chain(producers)
}

/// What `wsledger explain` says of a cause or producer code (`kind` as
/// [`diagnosis_codes`] gives it).
fn diagnosis_text(code: &str, kind: &str, meaning: &str) -> String {
    let (what, todo) = if kind == "cause" {
        (
            "A cause of the diagnosis: why a run is stuck (`run_stuck_running`) or cannot be \
             read (`run_unreadable`). `wsledger doctor scan` gives one per such run in \
             `diagnosis.causes[]`, with the evidence it rests on and `remedy`, the plan step \
             that deals with the run.",
            CAUSE_ADVICE
                .iter()
                .find(|(c, _)| *c == code)
                .map_or("Run `wsledger doctor repair` to see the plan.", |(_, a)| *a),
        )
    } else {
        (
            "A producer of the diagnosis: a damaged event whose shape matches a known bug of \
             the program that wrote it. It is an inference from a fingerprint, never a proof \
             (`inference: true`), and changes no finding.",
            "Deal with the damaged event as its finding code says (`wsledger explain \
             orphan_response`, say); the producer only tells you which program most likely \
             wrote it.",
        )
    };
    format!("{code} ({kind})\n  {meaning}\n\n{what}\n\nWhat to do\n  {todo}\n")
}

fn first_sentence(text: &str) -> &str {
    text.split(" (").next().unwrap_or(text)
}

pub fn run(args: &ExplainArgs, printer: &mut Printer) -> Result<ExitStatus, CliError> {
    let io = |e: std::io::Error| CliError::new(format!("writing output: {e}"), "");
    if args.list {
        for c in CODES {
            writeln!(
                printer.out(),
                "{:<36} {:<8} {}",
                c.code,
                c.severity.as_str(),
                c.title
            )
            .map_err(io)?;
        }
        for (code, kind, text) in replay_codes().chain(diagnosis_codes()) {
            writeln!(
                printer.out(),
                "{code:<36} {kind:<8} {}",
                first_sentence(text)
            )
            .map_err(io)?;
        }
        return Ok(ExitStatus::Success);
    }
    let code = args.code.as_deref().unwrap_or_default();
    match code_info(code) {
        Some(info) => {
            write!(printer.out(), "{}", explain_text(info)).map_err(io)?;
            if info.code == "startup_refused" {
                write!(
                    printer.out(),
                    "\n{}",
                    crate::startup::reasons::explain_text()
                )
                .map_err(io)?;
            }
            Ok(ExitStatus::Success)
        }
        None if replay_codes().any(|(c, _, _)| c == code) => {
            let (_, kind, text) = replay_codes()
                .find(|(c, _, _)| *c == code)
                .unwrap_or_default();
            let what = if kind == "replay" {
                "A divergence of `wsledger replay`: a stored projection (the transcript, the \
                 tool tables, the run header or its operational events) disagrees with the \
                 event log, which is Maka's only authority, or the log itself is damaged. It \
                 makes replay exit 1."
            } else {
                "A note of `wsledger replay`: worth knowing, never an error; it does not change \
                 the exit status."
            };
            write!(
                printer.out(),
                "{code} ({kind})\n  {text}\n\n{what}\n\nWhat to do\n  Run `wsledger replay --session ID` \
                 to see the ids involved, the stored value and the value the log implies; \
                 `wsledger doctor scan` says whether Maka is affected.\n"
            )
            .map_err(io)?;
            Ok(ExitStatus::Success)
        }
        None if diagnosis_codes().any(|(c, _, _)| c == code) => {
            let (_, kind, text) = diagnosis_codes()
                .find(|(c, _, _)| *c == code)
                .unwrap_or_default();
            write!(printer.out(), "{}", diagnosis_text(code, kind, text)).map_err(io)?;
            Ok(ExitStatus::Success)
        }
        None => Err(CliError::new(
            format!("unknown code `{code}`"),
            "run `wsledger explain --list` to see every code",
        )),
    }
}

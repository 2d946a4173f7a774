//! `wsledger doctor finalize-runs`.

use clap::Args;

use super::write_args::NoBackup;
use super::{CliError, ExitStatus, GlobalArgs, Printer};
use crate::finalize::apply::Mode;
use crate::finalize::PlanOptions;
use crate::report::finalize::render_plan;
use crate::report::Format;

/// Finish runs left `running` by a dropped terminal event, exactly as Maka's own
/// start-up recovery would, so Maka accepts the result.
///
/// Without `--apply` this is a dry run: it prints the plan (what each run gets:
/// event id, status, failure class, recovery reason, event_seq, ordinal) and every
/// run it leaves alone with the reason, and changes nothing.
///
/// With `--apply` it refuses while Maka runs (it takes Maka's own owner lock) or
/// another process has the database open (it holds a lock on the file or its `-shm`),
/// refuses a schema other than Maka's current one, backs the database up with
/// SQLite's online backup API, writes the whole plan in one transaction after
/// checking that no planned run changed, then rescans.
#[derive(Debug, Args)]
pub struct FinalizeArgs {
    /// Only runs of this session
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Only this run
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// Only runs whose last activity is at least this old: a number and a unit
    /// (ms, s, m, h, d, w), e.g. `30m`, `2h`, `7d`, `1h30m`
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub older_than: Option<i64>,
    /// Also finalize runs of archived sessions (Maka's recovery skips them)
    #[arg(long)]
    pub include_archived: bool,
    /// Write the plan (default: dry run, nothing is written)
    #[arg(long, conflicts_with = "check")]
    pub apply: bool,
    /// Never write; exit 1 when the plan is not empty or a stuck run is left out of it
    #[arg(long)]
    pub check: bool,
    #[command(flatten)]
    pub backup: NoBackup,
    /// Also write what Maka's start-up writes after the event: the run header, the
    /// `run_failed` run event, the `turn_state` record and the session status
    #[arg(long)]
    pub project_header: bool,
}

/// Parses `30m`, `2h`, `7d`, `1h30m`, `500ms` into milliseconds.
pub fn parse_duration(s: &str) -> Result<i64, String> {
    let bad = || format!("`{s}` is not a duration (e.g. 30m, 2h, 7d)");
    let mut total: i64 = 0;
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: i64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let ms = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 604_800_000,
            _ => return Err(bad()),
        };
        total = n
            .checked_mul(ms)
            .and_then(|x| total.checked_add(x))
            .ok_or_else(bad)?;
    }
    Ok(total)
}

pub fn run(
    global: &GlobalArgs,
    args: &FinalizeArgs,
    printer: &mut Printer,
) -> Result<ExitStatus, CliError> {
    let (format, db, now) = super::plan_command(global)?;
    let shown = db.display().to_string();
    let opts = PlanOptions {
        session: args.session.clone(),
        run: args.run.clone(),
        older_than_ms: args.older_than,
        now_ms: now,
        include_archived: args.include_archived,
        project_header: args.project_header,
    };
    let mode = match (args.check, args.apply) {
        (true, _) => Mode::Check,
        (false, true) => Mode::Apply {
            backup: !args.backup.no_backup,
        },
        (false, false) => Mode::DryRun,
    };
    let done = crate::finalize::apply::run(&db, &opts, mode, printer)?;
    if let (Some(n), false) = (&done.footer_note, format == Format::Table) {
        printer.note(n);
    }
    let opts = printer.render_opts();
    let plan = &done.plan;
    super::output(render_plan(
        printer.out(),
        plan,
        &shown,
        format,
        &opts,
        &done.footer,
    ))?;
    Ok(if done.found {
        ExitStatus::Findings
    } else {
        ExitStatus::Success
    })
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30m"), Ok(1_800_000));
        assert_eq!(parse_duration("2h"), Ok(7_200_000));
        assert_eq!(parse_duration("7d"), Ok(604_800_000));
        assert_eq!(parse_duration("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration("500ms"), Ok(500));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("3y").is_err());
        assert!(parse_duration("99999999999999999d").is_err());
    }
}

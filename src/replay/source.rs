//! Where a replay's session comes from: a workspace database (read as a bundle, at one
//! snapshot) or a bundle file; and the nearest ids named when one is not found.

use std::io::Write;
use std::path::Path;

use super::{operation_ids_named, replay, Replay, SessionRows};
use crate::bundle::Bundle;
use crate::db::Workspace;
use crate::error::UserError;

/// Reads one session of a workspace database as a bundle. An unknown session is an
/// error whose hint lists the nearest session ids.
pub fn export_from_database(db: &Path, session: &str) -> Result<Bundle, UserError> {
    // Every table of the session at one snapshot: Maka commits a tool call's rows in
    // several tables at once, and a bundle must hold all of them or none.
    let (bundle, ids) = Workspace::read(db, |ws| {
        let bundle = ws.export_session(session, &operation_ids_named)?;
        let empty = SessionRows::from_bundle(&bundle).is_ok_and(|r| r.is_empty());
        let ids = if empty { Some(ws.session_ids()?) } else { None };
        Ok((bundle, ids))
    })?;
    let rows = SessionRows::from_bundle(&bundle)
        .map_err(|e| UserError::new(e.to_string(), "export the session again"))?;
    if rows.is_empty() {
        let ids = ids.unwrap_or_default();
        let near = nearest(session, &ids, 5);
        let hint = if near.is_empty() {
            "the workspace has no sessions".to_owned()
        } else {
            format!("nearest session ids: {}", near.join(", "))
        };
        return Err(UserError::new(
            format!(
                "session `{}` not found in {}",
                crate::sanitize::sanitize(session),
                db.display()
            ),
            hint,
        ));
    }
    Ok(bundle)
}

/// Replays a bundle, keeping only `run` when one is named.
pub fn replay_bundle(bundle: &Bundle, run: Option<&str>) -> Result<Replay, UserError> {
    replay_rows(rows_of(bundle)?, bundle, run)
}

/// Replays a session exported from the database `db` (by [`export_from_database`]):
/// an `event_seq` gap whose every missing event is in an excision bundle beside the
/// database is a note, not a divergence.
pub fn replay_exported(db: &Path, bundle: &Bundle, run: Option<&str>) -> Result<Replay, UserError> {
    let mut rows = rows_of(bundle)?;
    let excised = crate::excise::gaps::ExcisedRows::beside(db);
    rows.excised_seqs = excised
        .seqs
        .into_iter()
        .filter_map(|(key, paths)| Some((key, paths.into_iter().next()?)))
        .collect();
    replay_rows(rows, bundle, run)
}

fn rows_of(bundle: &Bundle) -> Result<SessionRows, UserError> {
    SessionRows::from_bundle(bundle).map_err(|e| {
        UserError::new(
            e.to_string(),
            "a session bundle is written by `wsledger replay --session ID --export FILE`",
        )
    })
}

fn replay_rows(rows: SessionRows, bundle: &Bundle, run: Option<&str>) -> Result<Replay, UserError> {
    let mut r = replay(&rows);
    let s = &bundle.schema;
    let writer = crate::release::generation_by_versions(
        s.user_version,
        s.registry.as_ref(),
        s.capabilities.as_ref(),
    );
    if writer.is_some_and(crate::scan::release::keeps_session_files) {
        r.add_session_note(
            "transcript_in_files",
            format!(
                "Maka {} keeps this session's transcript in `sessions/{}/session.jsonl` beside \
                 the database; replay compares the log with the run headers only",
                writer.map(|g| g.display()).unwrap_or_default(),
                r.session_id
            ),
        );
    }
    if let Some(run) = run {
        if !r.keep_run(run) {
            let ids: Vec<String> = r.runs.iter().map(|x| x.run_id.clone()).collect();
            return Err(UserError::new(
                format!(
                    "session `{}` has no run `{}`",
                    r.session_id,
                    crate::sanitize::sanitize(run)
                ),
                format!("its runs: {}", nearest(run, &ids, ids.len()).join(", ")),
            ));
        }
    }
    Ok(r)
}

/// Reads a bundle file and replays it.
pub fn replay_bundle_file(path: &Path, run: Option<&str>) -> Result<Replay, UserError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        UserError::new(
            format!("cannot read bundle {}: {e}", path.display()),
            "check the path",
        )
    })?;
    let bundle = Bundle::from_json_text(&text).map_err(|e| {
        UserError::new(
            format!("{}: {e}", path.display()),
            "a session bundle is written by `wsledger replay --session ID --export FILE`",
        )
    })?;
    replay_bundle(&bundle, run)
}

/// Writes a session bundle to `file` (a temporary file renamed into place).
pub fn write_bundle(file: &Path, bundle: &Bundle) -> Result<(), UserError> {
    let err = |e: &dyn std::fmt::Display| {
        UserError::new(
            format!("cannot write bundle {}: {e}", file.display()),
            "check that the directory exists and is writable",
        )
    };
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| err(&e))?;
    tmp.write_all(bundle.to_json_text().as_bytes())
        .map_err(|e| err(&e))?;
    tmp.persist(file).map_err(|e| err(&e.error))?;
    Ok(())
}

/// Up to `n` candidates nearest to `target`: longest common prefix first, then
/// edit distance, then the id.
pub fn nearest(target: &str, candidates: &[String], n: usize) -> Vec<String> {
    let prefix = |c: &str| {
        c.chars()
            .zip(target.chars())
            .take_while(|(a, b)| a == b)
            .count()
    };
    let mut scored: Vec<(std::cmp::Reverse<usize>, usize, &String)> = candidates
        .iter()
        .map(|c| (std::cmp::Reverse(prefix(c)), edit_distance(target, c), c))
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(n)
        .map(|(_, _, c)| c.clone())
        .collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::{edit_distance, nearest};

    #[test]
    fn nearest_prefers_common_prefix_then_edit_distance() {
        let ids: Vec<String> = ["abc-1", "abd-2", "xyz", "abc-9"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(nearest("abc-2", &ids, 2), ["abc-1", "abc-9"]);
        assert_eq!(nearest("xy", &ids, 1), ["xyz"]);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}

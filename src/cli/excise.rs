//! `wsledger doctor excise`: its arguments (it runs as `doctor quarantine` does, see
//! `super::quarantine::run_bundles`).

use super::write_args::{BundleArgs, EXCISE};

/// Remove exactly the damaged facts from the ledger, keeping the conversation: each
/// event a scanner issue names (never the first, valid member of a duplicate pair)
/// and each undecodable `runtime_events` row, with what Maka's foreign keys cascade
/// from them (the session ordinal row) and the tool projection rows only they imply.
///
/// Without `--apply` it prints the plan: the events of each damaged session, every
/// row that would move, what it costs, and what Maka's gate and start-up would do
/// afterwards, judged by scanning a private copy of the file with the excision
/// applied. A session where excision would not heal the file, or would leave the
/// tool projections differing from Maka's rebuild, is left out (quarantine is still
/// needed there).
///
/// With `--apply` it takes Maka's owner lock, refuses while another process has the
/// database open, backs the database up, writes and checks a bundle per session
/// (`kind: "excise"`, which `doctor restore` puts back and `replay --bundle` shows),
/// deletes in one transaction and rescans. Session metadata, transcripts and session
/// files are never touched.
pub type ExciseArgs = BundleArgs<EXCISE>;

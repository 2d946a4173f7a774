//! wsledger: doctor and replay tool for the workspace database of the Apache Maka agent
//! runtime.
//!
//! Layers (the import graph is the architecture; no circle between rooms, which
//! `tests/house.rs` checks):
//! - `json`, `args_hash`, `event`, `ledger`, `header`: the pure core.
//!   Values in, values out; no I/O, no clock, no environment.
//! - `db`: the only module that names SQL (and the only writer, `db::write`; the one
//!   schema change it makes, putting back a derived object exactly, is `db::derived`
//!   on that writer), with the rows it reads. Below every room that reasons about them: the writer is handed the
//!   rule that says whether a repair may write the file (`db::write::SchemaGate`).
//! - `release`: the catalog of Maka generations and their rule switches, and the schema
//!   basis of a repair (`release::repair_basis`, whose `schema_gate` the writer gets),
//!   and what each release derives, with its exact text (`release::derived`).
//! - `session_header`: Maka's start-up check of a session header (pure), over `db`'s
//!   row and `release`'s header rules.
//! - `startup`: what each release's workspace composition does when it opens the file
//!   (opens, migrates, refuses), from schema facts `db::startup` reads. Below `scan`.
//! - `scan`: the walk of the ledger (`scan::pipeline`: its threads and queues), runs,
//!   what Maka lists (`scan::listed`), the upgrade preview (`scan::release`), and
//!   start-up (`scan::startup`: the strict recovery's blockers, and the `startup`
//!   verdict attached to the report).
//! - One room per capability, each a pure plan plus one `run`/`apply` owning the order
//!   of its steps: `finalize`, `quarantine` (with `restore`, of every bundle kind),
//!   `excise`, `rederive` (putting back what Maka derives), `repair`, `diagnosis`, `replay`, `info`, `checkup` (`doctor scan`: the
//!   scan, the gaps an excision explains, its diagnosis and expectations, composed).
//! - `apply`: the one scaffold every writing command goes through (owner lock and
//!   open-file check, backup, one `BEGIN IMMEDIATE` transaction, rescan).
//! - `lock`: Maka's owner lock and the open-file probe (`unsafe` for
//!   `fcntl`/`getpwuid_r`; the only other `unsafe` is one line of `db::rows`, ASCII
//!   bytes taken as text, and `background`'s `setpriority`, which lowers a thread's
//!   scheduling priority).
//! - `bundle` (the session bundle format), `findings`, `expect`, `error` (the error a
//!   user sees), `notes` (what a command says on stderr): small shared values.
//! - `report`: renders values; `cli`: parses arguments, calls one room, prints.

pub mod apply;
pub mod args_hash;
pub mod background;
pub mod bundle;
pub mod checkup;
pub mod cli;
pub mod db;
pub mod diagnosis;
pub mod error;
pub mod event;
pub mod excise;
pub mod expect;
pub mod fast_hash;
pub mod finalize;
pub mod findings;
#[cfg(test)]
mod fixture_dbs;
pub mod hash128;
pub mod header;
pub mod info;
pub mod json;
pub mod ledger;
pub mod lock;
#[cfg(test)]
mod mutate;
pub mod notes;
pub mod quarantine;
pub mod rederive;
pub mod release;
pub mod repair;
pub mod replay;
pub mod report;
pub mod sanitize;
pub mod scan;
pub mod session_header;
pub mod startup;

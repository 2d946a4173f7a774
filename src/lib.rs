//! wsledger: doctor and replay tool for the workspace database of the Apache Maka agent
//! runtime.
//!
//! Layers (the import graph is the architecture):
//! - `json`, `args_hash`, `event`, `ledger`: the pure core. Values in, values out; no
//!   I/O, no clock, no environment.
//! - `finalize`: the finalize-runs planner, also pure (rows in, a plan out).
//! - `diagnosis`: causes of stuck runs, damaged sessions and the ordered remedy, also
//!   pure (the scan, the finalize plan and a few rows in, a diagnosis out).
//! - `db`: the only module that names SQL (and the only writer, `db::write`).
//! - `lock`: Maka's owner lock (`unsafe` for `fcntl`/`getpwuid_r`; the only other
//!   `unsafe` is one line of `db::rows`, ASCII bytes taken as text, and `background`'s
//!   `setpriority`, which lowers a thread's scheduling priority).
//! - `report`: renders values; `cli`: parses arguments and orchestrates.

pub mod args_hash;
pub mod background;
pub mod bundle;
pub mod cli;
pub mod db;
pub mod diagnosis;
pub mod doctor;
pub mod event;
pub mod expect;
pub mod fast_hash;
pub mod finalize;
pub mod findings;
#[cfg(test)]
mod fixture_dbs;
pub mod hash128;
pub mod header;
pub mod json;
pub mod ledger;
pub mod lock;
#[cfg(test)]
mod mutate;
pub mod quarantine;
pub mod release;
pub mod replay;
pub mod report;
pub mod scan;
pub mod session_header;
pub mod startup;

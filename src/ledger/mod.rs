//! Maka's tool-ledger scanner and terminal classification, re-implemented. Pure: no I/O,
//! no clock.

pub mod dependencies;
pub mod scanner;
pub mod terminal;

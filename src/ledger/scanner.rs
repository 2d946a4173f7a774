//! `scanToolLedger`: Maka's tool-ledger scanner, reporting every issue it meets.
//! (Implemented by the scanner work; see the module's tests.)

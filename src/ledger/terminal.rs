//! `classifyTerminalRuntimeLedger` and `classifyRuntimeEventTerminalFact`.
//! (Implemented by the scanner work; see the module's tests.)

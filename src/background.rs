//! Work that no one waits for until the end, kept from slowing work that is waited for.
//!
//! A scan runs more threads than a small machine has cores: the walk's thread, which
//! everything waits for, and beside it the decoder and checks needed only at the end.
//! Linux shares the cores fairly between the threads that want one: with three always
//! ready on two cores, the walk's thread gets two thirds of one. A check marked as
//! background mostly runs when a core would otherwise wait (with the journal hashed
//! on a third connection: 21.5 s against 23.1 s, medians of four alternating runs of
//! a 5M-event scan, 2026-12-02).

/// Lowers the calling thread's scheduling priority (Linux: `nice` 10 for this thread
/// only; elsewhere nothing). It cannot be raised again: call it on a thread whose
/// remaining work is all background.
pub fn lower_this_thread() {
    #[cfg(target_os = "linux")]
    lower_on_linux();
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn lower_on_linux() {
    // SAFETY: both calls take plain integers and touch no memory of ours. On Linux,
    // `PRIO_PROCESS` with a thread id sets that thread's nice value alone. A failure
    // (a sandbox refusing it) leaves the priority as it was, which is only slower.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}

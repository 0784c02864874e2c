//! Which threads are profiled.
use aya_ebpf::helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid};

use crate::maps;

/// The current thread's (pid, tid), if it is profiled.
///
/// The idle task (tid 0) is never profiled: its "samples" are idle time.
#[inline(always)]
pub fn current() -> Option<(u32, u32)> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let pid = (pid_tgid >> 32) as u32;
    #[expect(clippy::cast_possible_truncation, reason = "the low half is the tid")]
    let tid = pid_tgid as u32;
    if tid == 0 {
        return None;
    }
    if maps::target_all() || maps::is_target(pid) {
        Some((pid, tid))
    } else {
        None
    }
}

/// sched_process_exec: a process that execs into a `--comm` name becomes a
/// target now, not at the daemon's next look at `/proc`. A target's old
/// mappings are gone: the daemon is asked for the new ones at once, so
/// they are read (for the walker and the symbolizer) while it lives.
pub fn on_exec() {
    let pid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if !maps::target_all() && !maps::is_target(pid) {
        let Ok(comm) = bpf_get_current_comm() else {
            return;
        };
        if !maps::is_target_comm(&comm) {
            return;
        }
        maps::add_target(pid);
    }
    maps::invalidate_mappings(pid);
}

//! Which threads are profiled.
use aya_ebpf::helpers::bpf_get_current_pid_tgid;

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

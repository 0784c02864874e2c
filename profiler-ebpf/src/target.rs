//! Which threads are profiled.
use aya_ebpf::{
    bindings::task_struct,
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid},
};

use crate::{maps, process_seen, sched_info};

/// The current thread's (pid, tid), if it is profiled.
///
/// The idle task (tid 0) is never profiled: its "samples" are idle time.
#[inline(always)]
pub fn current() -> Option<(u32, u32)> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let pid = (pid_tgid >> 32) as u32;
    #[expect(clippy::cast_possible_truncation, reason = "the low half is the tid")]
    let tid = pid_tgid as u32;
    (tid != 0 && is(pid)).then_some((pid, tid))
}

/// `task`'s tid, unless it is certainly not profiled: the idle task, or
/// a process outside the target filter. Field loads and an array read, no
/// call: `sched_switch` passes over most threads of the machine this way.
/// Its process id is read only to be filtered (with `--all`, a switch
/// reads no more than the two tids). A thread it returns may still not be
/// a target ([`is`]).
#[inline(always)]
pub fn candidate(task: *mut task_struct) -> Option<u32> {
    let tid = sched_info::tid(task);
    if tid == 0 || !(maps::target_all() || maps::may_be_target(sched_info::pid(task))) {
        return None;
    }
    Some(tid)
}

/// Whether process `pid` is profiled: exactly, by the target set.
#[inline(always)]
pub fn is(pid: u32) -> bool {
    maps::target_all() || maps::is_target(pid)
}

/// sched_process_exec: a process that execs into a `--comm` name becomes a
/// target now, not at the daemon's next look at `/proc`. A target's old
/// mappings are gone: the daemon is asked for the new ones at once, so
/// they are read (for the walker and the symbolizer) while it lives.
/// Under `--all`, where every exec of the host would be asked about, the
/// old mappings are only forgotten: a process is asked about at its first
/// sample, and the mmap records keep the images of those that end before
/// (a build's processes mostly run no sample: a thousand `/bin/true` a
/// second cost the daemon 10.7% of a core, 60% of it serving these asks).
/// A request still waiting from a sample before the exec is renewed: it
/// saw the old program (a container's `chroot` named the program it ran).
pub fn on_exec() {
    let pid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if maps::target_all() {
        maps::forget_mappings(pid);
        maps::renew_waiting_request(pid, maps::Scratch::Tracing as u32, |seen| {
            process_seen::current(pid, seen);
        });
        return;
    }
    if !is(pid) {
        let Ok(comm) = bpf_get_current_comm() else {
            return;
        };
        if !maps::is_target_comm(&comm) {
            return;
        }
        maps::add_target(pid);
    }
    maps::invalidate_mappings(pid, maps::Scratch::Tracing as u32, |seen| {
        process_seen::current(pid, seen);
    });
}

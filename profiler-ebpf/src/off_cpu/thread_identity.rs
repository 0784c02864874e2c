//! A tracked thread's name and tid as its off-CPU samples are labelled
//! with them (`TaskState::comm`, `TaskState::tid`), kept current.
//!
//! Both are taken when the thread is first tracked. On-CPU samples read
//! the name at each sample; off-CPU samples, flushed later, read the
//! entry. Without these hooks a thread that renames itself
//! (`prctl(PR_SET_NAME)`, `pthread_setname_np`) or execs kept its old
//! name on its off-CPU samples only: a program's sleep after an exec was
//! labelled with the name of the program it replaced. A thread other than
//! the leader that execs also takes the process's pid as its tid, which
//! its entry must follow.
use aya_ebpf::{
    bindings::task_struct,
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task_btf, bpf_probe_read_kernel_str_bytes,
    },
};
use profiler_common::sample::COMM_LEN;

use super::interval_cell;
use crate::maps;

/// task_rename(task, comm): `task` is now named `comm`, by a rename or by
/// an exec (which names it after the new program).
pub fn on_rename(task: *mut task_struct, comm: *const u8) {
    let Some(entry) = maps::task(task) else {
        return;
    };
    let mut name = [0u8; COMM_LEN];
    // SAFETY: `comm` is the tracepoint's kernel string argument; the helper
    // reads at most `name.len()` bytes of it, NUL-terminated.
    if unsafe { bpf_probe_read_kernel_str_bytes(comm, &mut name) }.is_ok() {
        // SAFETY: `entry` comes from a successful map lookup and stays
        // valid for this program's run.
        unsafe { (*entry).comm = name };
    }
}

/// sched_process_exec: the current thread, `old_tid` before the exec, now
/// runs a new program. Unless it was the leader, its tid is now the pid:
/// its entry takes the new tid, and what was kept under the old one (its
/// interval cell, closed while it runs; its task work; an in-flight mark)
/// is let go. Its next switch-out claims the cell of its new tid, and
/// flushes any weight still pending (its task work is cancelled with the
/// map entry).
pub fn on_exec(old_tid: u32) {
    #[expect(clippy::cast_possible_truncation, reason = "the low half is the tid")]
    let tid = bpf_get_current_pid_tgid() as u32;
    if tid == old_tid {
        return;
    }
    // SAFETY: bpf_get_current_task_btf has no preconditions.
    let task = unsafe { bpf_get_current_task_btf() };
    let Some(entry) = maps::task(task) else {
        return;
    };
    // SAFETY: `entry` comes from a successful map lookup and stays valid
    // for this program's run.
    unsafe {
        (*entry).tid = tid;
        (*entry).work_scheduled = 0;
    }
    interval_cell::release(old_tid);
    maps::forget_tid(old_tid);
}

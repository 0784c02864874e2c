//! The user stack of kept off-CPU weight, taken by a BPF task work: a
//! callback the kernel runs in the thread's own context on its way back to
//! user space (`bpf_task_work_schedule_resume`, Linux 6.18).
//!
//! `sched_switch` schedules it only when a switch-in keeps weight (rare at
//! the default rate), so nothing runs on the other returns to user space:
//! this replaces `rseq_update`, which runs a program on every one, and it
//! is exact for threads without rseq (Go, static musl) too.
//!
//! The kfunc is declared `extern` here. aya 0.14 cannot relocate kfunc
//! calls, so the daemon patches the call instruction in the object before
//! loading it (`profiler-userspace/src/bpf/kfunc.rs`): to a kfunc call by
//! the kernel's BTF id, or, where the kernel has no such kfunc, to
//! `r0 = -EOPNOTSUPP`; either way the load-time global `TASK_WORK_LINKED`
//! says which, and unlinked, [`schedule`] returns before the call.
use core::ffi::c_void;

use aya_ebpf::{bindings::task_struct, helpers::bpf_get_current_task_btf};
use profiler_common::{stats::Stat, task::bpf_task_work};

use super::flush;
use crate::maps;

unsafe extern "C" {
    /// Schedules `callback(map, key, value)` to run in `task`'s context
    /// when it next returns to user space. `aux` is filled in by the
    /// verifier. Returns 0 or a negative errno (`-EBUSY` while `work` is
    /// still scheduled).
    fn bpf_task_work_schedule_resume_impl(
        task: *mut task_struct,
        work: *mut bpf_task_work,
        map: *mut c_void,
        callback: extern "C" fn(*mut c_void, *mut c_void, *mut c_void) -> i32,
        aux: *mut c_void,
    ) -> i32;
    /// Preemption off and on again on this CPU (Linux 6.10).
    fn bpf_preempt_disable();
    fn bpf_preempt_enable();
}

/// Schedules the flush of `task`'s pending weight for its return to user
/// space. False when it cannot be (no kfunc; or, counted, no map entry,
/// no memory for the kernel's context of it, or still scheduled): the
/// weight then waits for the thread's next switch-out.
///
/// # Safety
/// `task` must be a `task_struct` pointer the verifier knows as one (a
/// tp_btf argument).
#[inline(always)]
pub unsafe fn schedule(task: *mut task_struct, tid: u32) -> bool {
    // Unlinked, the verifier must see this call and the callback as dead
    // code: it removes a callback it never reaches, and a reference to it
    // left in live code fails the load.
    if !maps::task_work_linked() {
        return false;
    }
    let Some(work) = maps::task_work(tid) else {
        maps::count(Stat::TaskWorkUnscheduled, 1);
        return false;
    };
    let callback: extern "C" fn(*mut c_void, *mut c_void, *mut c_void) -> i32 = on_resume;
    // SAFETY: `work` points into a value of the map passed with it; the
    // callback is a static function with the kfunc's callback signature.
    let err = unsafe {
        bpf_task_work_schedule_resume_impl(
            task,
            &raw mut (*work).work,
            maps::task_work_map(),
            callback,
            core::ptr::null_mut(),
        )
    };
    if err != 0 {
        maps::count(Stat::TaskWorkUnscheduled, 1);
    }
    err == 0
}

/// Runs in the thread's own context, on its way back to user space.
///
/// Task work runs with preemption on, but the flush walks the stack in
/// per-CPU scratch that `sched_switch` (a flush at switch-out) and other
/// threads' task work use too: preemption stays off while it does.
extern "C" fn on_resume(_map: *mut c_void, _key: *mut c_void, _value: *mut c_void) -> i32 {
    // SAFETY: bpf_get_current_task_btf has no preconditions; the preempt
    // kfuncs pair up in this function, as the verifier checks.
    unsafe {
        let task = bpf_get_current_task_btf();
        bpf_preempt_disable();
        flush::on_task_work(task);
        bpf_preempt_enable();
    }
    0
}

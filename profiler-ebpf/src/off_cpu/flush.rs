//! Pending off-CPU weight, with the user stack: a kept interval's weight
//! waits in the thread's entry until the thread runs a hook of its own
//! (see `off_cpu/mod.rs`), where its user stack can be read.
use aya_ebpf::{
    bindings::task_struct,
    helpers::{bpf_get_current_pid_tgid, bpf_get_current_task_btf},
};
use core::intrinsics::{AtomicOrdering, atomic_xadd};
use profiler_common::{sample::ThreadState, stack::NO_STACK, stats::Stat, task::TaskState};

use super::{interval_cell, waker};
use crate::{aggregate, go, maps, thread_ctx, unwind};

/// Where a thread's pending weight is flushed (see `off_cpu/mod.rs`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// `rseq_update`: returning to user space; the thread uses rseq.
    Rseq,
    /// `sys_exit`: returning from a system call.
    SysExit,
    /// The task work `sched_switch` scheduled: returning to user space.
    TaskWork,
    /// Its next switch-out or its exit.
    Later,
}

/// `rseq_update` or `sys_exit`: the current thread is on its way back to
/// user space, still with the user stack it blocked with.
pub fn on_return_to_user(hook: Flush) {
    if maps::off_cpu_dispatch_only() {
        return;
    }
    // Nearly always zero: return before looking the thread up.
    let Some(pending) = maps::pending_counter() else {
        return;
    };
    // SAFETY: a pointer into a one-entry array map, valid for this run.
    if unsafe { *pending } == 0 {
        return;
    }
    // SAFETY: bpf_get_current_task_btf has no preconditions.
    let task = unsafe { bpf_get_current_task_btf() };
    if let Some(entry) = maps::task(task) {
        if hook == Flush::Rseq {
            // SAFETY: `entry` comes from a successful map lookup and stays
            // valid for this program's run.
            unsafe { (*entry).rseq = 1 };
        }
        flush(entry, hook);
    }
}

/// The task work scheduled at a kept switch-in runs: `task` (the current
/// thread) is on its way back to user space, with the user stack it
/// blocked or was preempted with.
pub fn on_task_work(task: *mut task_struct) {
    if let Some(entry) = maps::task(task) {
        // SAFETY: `entry` comes from a successful map lookup and stays
        // valid for this program's run.
        unsafe { (*entry).rseq = 1 };
        flush(entry, Flush::TaskWork);
    }
}

/// sched_process_exit: flush what the exiting thread still owes, forget it.
pub fn on_exit() {
    // SAFETY: bpf_get_current_task_btf has no preconditions.
    let task = unsafe { bpf_get_current_task_btf() };
    if let Some(entry) = maps::task(task) {
        flush(entry, Flush::Later);
        // SAFETY: `entry` comes from a successful lookup, valid until the
        // removal below.
        let tid = unsafe { (*entry).tid };
        maps::forget_task(task, tid);
    }
    #[expect(clippy::cast_possible_truncation, reason = "the low half is the tid")]
    interval_cell::release(bpf_get_current_pid_tgid() as u32);
}

/// Moves a thread's pending weight into the active slot, with the user
/// stack of the current context (which must be that thread's), taken at
/// `hook`.
pub fn flush(entry: *mut TaskState, hook: Flush) {
    // SAFETY: `entry` comes from a successful map lookup and stays valid for
    // this program's run; the thread it describes is the current one.
    unsafe {
        if (*entry).pending == 0 {
            return;
        }
        let slot = maps::active_slot();
        let runtimes = maps::runtimes((*entry).pid);
        let (user_stack, user_stack_err, python_gil) =
            unwind::capture_user(&slot, (*entry).pid, runtimes, maps::Scratch::Tracing);
        let Some(key) = maps::key_scratch(maps::Scratch::Tracing) else {
            return;
        };
        (key.pid, key.tid) = ((*entry).pid, (*entry).tid);
        (key.user_stack, key.user_stack_err) = (user_stack, user_stack_err);
        (key.kernel_stack, key.kernel_stack_err) =
            ((*entry).kernel_stack, (*entry).kernel_stack_err);
        key.state = (*entry).pending_state;
        key.python_gil = python_gil;
        // A thread's off-CPU time is no goroutine's own (the goroutine
        // view has the goroutines' waits): no goroutine id.
        let goroutine = go::of_thread((*entry).pid, runtimes, false);
        (key.go_labels, key.go_labels_identity) = (goroutine.labels, goroutine.identity);
        thread_ctx::read((*entry).pid, runtimes, key, maps::Scratch::Tracing);
        if (*entry).blocked_count != 0 {
            waker::name_in(key, entry, &slot, (*entry).blocked_ns);
            let mut weight = aggregate::weight(0, (*entry).blocked_ns, (*entry).blocked_count);
            weight.comm = (*entry).comm;
            aggregate::add(slot.samples, key, &weight);
        }
        if (*entry).runqueue_count != 0 {
            key.state = ThreadState::Runqueue as u32;
            key.waker = profiler_common::waker::NONE;
            let mut weight = aggregate::weight(0, (*entry).runqueue_ns, (*entry).runqueue_count);
            weight.comm = (*entry).comm;
            aggregate::add(slot.samples, key, &weight);
        }
        // Without rseq, the thread may have run user code since it blocked.
        if hook == Flush::Later && (*entry).rseq == 0 && user_stack != NO_STACK {
            maps::count(
                Stat::OffCpuNsApproxUserStack,
                (*entry).blocked_ns + (*entry).runqueue_ns,
            );
        }
        (*entry).blocked_ns = 0;
        (*entry).blocked_count = 0;
        (*entry).runqueue_ns = 0;
        (*entry).runqueue_count = 0;
        (*entry).pending = 0;
        (*entry).work_scheduled = 0;
        (*entry).waker_pending = 0;
        interval_cell::mirror_pending((*entry).tid, false);
    }
    add_pending(u64::MAX); // -1, wrapping
}

#[inline(always)]
pub fn add_pending(delta: u64) {
    if let Some(counter) = maps::pending_counter() {
        // SAFETY: a pointer into a one-entry array map, valid for this run;
        // shared by all CPUs, hence the atomic add.
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(counter, delta) };
    }
}

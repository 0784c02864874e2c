//! Off-CPU time: how long target threads stay off the CPU, and why.
//!
//! - Switch-out (sched_switch, in the leaving thread's context): note the
//!   time (the run queue's clock, `clock.rs`), the state it leaves in and
//!   the scheduler's run-queue total. Cheap: no stack is captured here.
//! - Switch-in (sched_switch, `next`): the durations are known. The
//!   scheduler's own accounting says how much of the interval was spent
//!   waiting for a CPU (`sched_info`, no wakeup hook needed); the rest was
//!   blocked. Apply the sampling rule (profiler_common::off_cpu) to each
//!   part. Only when a part is kept is a stack captured: the kernel stack
//!   of `next` right there with bpf_get_task_stack, and the weight is
//!   parked in the task's entry as pending.
//! - The user stack can only be read in the thread's own context, so the
//!   pending weight is flushed the first time the thread runs a hook of its
//!   own:
//!   - The task work the switch-in scheduled (`task_work.rs`, Linux 6.18),
//!     on its way back to user space: exact, for every thread, and nothing
//!     runs on the returns to user space of intervals that were dropped.
//!   - Without task work, `rseq_update`, on its way back to user space
//!     after it was switched out. It fires once per switch, only for
//!     threads registered with rseq (glibc >= 2.35 registers every
//!     thread), and the user registers there are exactly those the thread
//!     blocked or was preempted with.
//!   - `sys_exit`, only where `rseq_update` is missing or with
//!     `--off-cpu-sys-exit`: exact for waits in system calls, but hooking
//!     it slows every system call on the machine.
//!   - Its next switch-out, or its exit. For a thread that has not
//!     returned to user space since (still in the same system call) the
//!     stack is exact. Without task work, for a thread without rseq that
//!     ran user code in between (Go, static musl) it is where the thread
//!     blocks next: an approximation, counted as `OffCpuNsApproxUserStack`.
use aya_ebpf::{
    bindings::task_struct,
    helpers::{bpf_get_current_comm, bpf_get_current_task_btf, bpf_get_prandom_u32},
    programs::BtfTracePointContext,
};
use core::intrinsics::{AtomicOrdering, atomic_xadd};
use profiler_common::{
    off_cpu::{Weight, sample, sample_naive, split_interval, xorshift_next},
    sample::{COMM_LEN, SampleKey, ThreadState},
    stack::NO_STACK,
    stats::Stat,
    task::TaskState,
};

use aya_log_ebpf::warn;

use crate::{
    aggregate,
    clock::{self, Clock},
    maps, sched_info, stack, target, task_work, unwind,
};

/// `TASK_UNINTERRUPTIBLE` and `TASK_NOLOAD` from `linux/sched.h`; a task
/// with both is an idle kernel thread (TASK_IDLE), not a disk wait.
const TASK_UNINTERRUPTIBLE: u32 = 0x2;
const TASK_NOLOAD: u32 = 0x400;

/// sched_switch(bool preempt, task_struct *prev, task_struct *next,
/// unsigned int prev_state).
pub fn on_switch(ctx: &BtfTracePointContext) {
    if maps::off_cpu_dispatch_only() {
        return;
    }
    let preempt: u64 = ctx.arg(0);
    let prev: *mut task_struct = ctx.arg(1);
    let next: *mut task_struct = ctx.arg(2);
    let prev_state: u64 = ctx.arg(3);
    // Most switches on a machine are of threads that are not profiled:
    // they are passed over before any task-storage lookup or call.
    let prev_ids = target::candidate(prev);
    let next_candidate = target::candidate(next).is_some();
    let mut clock = Clock::new();
    if let Some(ids) = prev_ids {
        #[expect(clippy::cast_possible_truncation, reason = "an unsigned int argument")]
        switch_out(
            ctx,
            prev,
            ids,
            preempt & 0xff != 0,
            prev_state as u32,
            &mut clock,
        );
    }
    if next_candidate {
        switch_in(next, &mut clock);
    }
}

/// Where a thread's pending weight is flushed (see the module header).
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
}

/// `prev`, a thread with ids `(pid, tid)` that may be profiled, leaves the
/// CPU. A thread with an entry is a target's (and stays one until it
/// exits), so only threads seen for the first time pay the exact check.
fn switch_out(
    ctx: &BtfTracePointContext,
    prev: *mut task_struct,
    (pid, tid): (u32, u32),
    preempt: bool,
    prev_state: u32,
    clock: &mut Clock,
) {
    let entry = if let Some(entry) = maps::task(prev) {
        entry
    } else {
        if !target::is(pid) {
            return;
        }
        let fresh = TaskState {
            pid,
            tid,
            comm: bpf_get_current_comm().unwrap_or([0; COMM_LEN]),
            ..TaskState::default()
        };
        let Some(entry) = maps::track_task(prev, &fresh) else {
            // Rare (an allocation failure) and counted; the log says which.
            warn!(
                ctx,
                "off-CPU: thread {} of {} not tracked: no task storage", tid, pid
            );
            return;
        };
        entry
    };
    let state = if preempt || prev_state == 0 {
        ThreadState::Runqueue
    } else if prev_state & TASK_UNINTERRUPTIBLE != 0 && prev_state & TASK_NOLOAD == 0 {
        ThreadState::Disk
    } else {
        ThreadState::Sleeping
    };
    flush(entry, Flush::Later);
    // SAFETY: `entry` comes from a successful map lookup or insert and stays
    // valid for this program's run.
    unsafe {
        let now = clock.now(prev);
        (*entry).off_since_clock = now;
        (*entry).off_since_ns = clock::to_ktime(now);
        (*entry).run_delay_ns = sched_info::run_delay(prev);
        (*entry).state = state as u32;
    }
}

fn switch_in(next: *mut task_struct, clock: &mut Clock) {
    let Some(entry) = maps::task(next) else {
        return;
    };
    let now = clock.now(next);
    // SAFETY: `entry` comes from a successful map lookup and stays valid for
    // this program's run.
    unsafe {
        let (off, start) = ((*entry).off_since_ns, (*entry).off_since_clock);
        if off == 0 {
            return;
        }
        (*entry).off_since_ns = 0;
        // An interval open across a window's end was accounted by userspace
        // up to that end, in ktime (see profiler_common::maps::IN_FLIGHT):
        // that much of it is not counted again.
        let mut start = start;
        if off < maps::last_flip_ns()
            && let Some(until) = maps::take_accounted((*entry).tid)
            && until > off
        {
            start += until - off;
        }
        if now <= start {
            return;
        }
        let state = (*entry).state;
        let queued = sched_info::queued_since(next, (*entry).run_delay_ns, now);
        let (blocked, runqueue) =
            split_interval(state == ThreadState::Runqueue as u32, start, now, queued);

        let mut kept = false;
        if let Some(w) = apply_rule(blocked) {
            (*entry).blocked_ns += w.time_ns;
            (*entry).blocked_count += w.count;
            (*entry).pending_state = state;
            kept = true;
        }
        if let Some(w) = apply_rule(runqueue) {
            (*entry).runqueue_ns += w.time_ns;
            (*entry).runqueue_count += w.count;
            kept = true;
        }
        if kept && (*entry).pending == 0 {
            let slot = maps::active_slot();
            let (kernel_stack, err) = stack::capture_task_kernel(next.cast(), &slot);
            (*entry).kernel_stack = kernel_stack;
            (*entry).kernel_stack_err = err;
            (*entry).pending = 1;
            add_pending(1);
            // Otherwise (and for threads that never return to user space,
            // whose task work would never run) the weight waits for
            // `rseq_update` or the next switch-out.
            if !sched_info::stays_in_kernel(next) {
                task_work::schedule(next, (*entry).tid);
            }
        }
    }
}

/// The sampling rule for one interval part; zero-length parts are no event.
#[inline(always)]
fn apply_rule(d_ns: u64) -> Option<Weight> {
    if d_ns == 0 {
        return None;
    }
    maps::count(Stat::OffCpuEventsSeen, 1);
    let (rate, naive) = maps::off_cpu_rule();
    let rand = random()?;
    let weight = if naive {
        sample_naive(d_ns, rate, rand)
    } else {
        sample(d_ns, rate, rand)
    };
    if weight.is_some() {
        maps::count(Stat::OffCpuEventsKept, 1);
    }
    weight
}

/// 32 random bits from this CPU's xorshift64* state: an inline step, where
/// `bpf_get_prandom_u32` would be a helper call on every kept or dropped
/// part. The state is seeded from the kernel's pool on first use.
#[inline(always)]
fn random() -> Option<u32> {
    let state = maps::off_cpu_random()?;
    // SAFETY: a pointer into this CPU's entry of a per-CPU array, valid for
    // this run; only sched_switch, with interrupts off, uses it.
    unsafe {
        if *state == 0 {
            // SAFETY: bpf_get_prandom_u32 has no preconditions.
            let seed = (u64::from(bpf_get_prandom_u32()) << 32) | u64::from(bpf_get_prandom_u32());
            *state = seed | 1;
        }
        Some(xorshift_next(&mut *state))
    }
}

/// Moves a thread's pending weight into the active slot, with the user
/// stack of the current context (which must be that thread's), taken at
/// `hook`.
fn flush(entry: *mut TaskState, hook: Flush) {
    // SAFETY: `entry` comes from a successful map lookup and stays valid for
    // this program's run; the thread it describes is the current one.
    unsafe {
        if (*entry).pending == 0 {
            return;
        }
        let slot = maps::active_slot();
        let (user_stack, user_stack_err) =
            unwind::capture_user(&slot, (*entry).pid, maps::Scratch::Tracing);
        let mut key = SampleKey {
            pid: (*entry).pid,
            tid: (*entry).tid,
            user_stack,
            kernel_stack: (*entry).kernel_stack,
            user_stack_err,
            kernel_stack_err: (*entry).kernel_stack_err,
            state: (*entry).pending_state,
            pad: 0,
        };
        if (*entry).blocked_count != 0 {
            let mut weight = aggregate::weight(0, (*entry).blocked_ns, (*entry).blocked_count);
            weight.comm = (*entry).comm;
            aggregate::add(slot.samples, &key, &weight);
        }
        if (*entry).runqueue_count != 0 {
            key.state = ThreadState::Runqueue as u32;
            let mut weight = aggregate::weight(0, (*entry).runqueue_ns, (*entry).runqueue_count);
            weight.comm = (*entry).comm;
            aggregate::add(slot.samples, &key, &weight);
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
    }
    add_pending(u64::MAX); // -1, wrapping
}

#[inline(always)]
fn add_pending(delta: u64) {
    if let Some(counter) = maps::pending_counter() {
        // SAFETY: a pointer into a one-entry array map, valid for this run;
        // shared by all CPUs, hence the atomic add.
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(counter, delta) };
    }
}

//! A kept interval (one that outlasted its threshold, at switch-in): its
//! blocked and run-queue parts weighed by the sampling rule, the kernel
//! stack of `next` captured, and the weight parked in the task's entry as
//! pending, for the user stack its own context will read (`flush.rs`).
use core::ptr::NonNull;

use aya_ebpf::bindings::task_struct;
use profiler_common::{
    off_cpu::{Weight, split_interval, weigh_part},
    sample::ThreadState,
    stats::Stat,
    task::{OpenInterval, TaskState},
};

use super::{flush::add_pending, interval_cell, waker};
use crate::{maps, sched_info, stack};

/// The interval `open` of `next`, thread `tid`, which ends at run-queue
/// clock `now`, outlasted its threshold: it is kept, split into its
/// blocked and run-queue parts by the scheduler's own accounting, which
/// share its weight. Out of line (rare). Returns `next`'s entry when its
/// weight now waits for a task work to be scheduled.
#[inline(never)]
pub(super) fn interval(
    next: *mut task_struct,
    tid: u32,
    open: *mut OpenInterval,
    now: u64,
) -> Option<NonNull<TaskState>> {
    // SAFETY: `open` points into a map value from a successful lookup,
    // valid for this program's run.
    let (off, mut start, keep_after, left_with, run_delay_out) = unsafe {
        (
            (*open).off_since_ns,
            (*open).off_since_clock,
            (*open).keep_after_ns,
            (*open).left_with,
            (*open).run_delay_ns,
        )
    };
    // An interval open across a window's end was accounted by userspace up
    // to that end, in ktime (see profiler_common::maps::IN_FLIGHT): that
    // much of it is not counted again, and the rest is an interval to the
    // rule of its own. The threshold drawn at switch-out is independent of
    // the daemon's draw, so it serves the rest too; and as the rest is
    // shorter, an interval that `switch_in` drops whole would be dropped
    // here as well, which is why only kept intervals look (the daemon
    // deletes the entries of threads it finds back). The entry is taken
    // before the interval is closed, so the daemon never deletes one that
    // is about to be used.
    let accounted = if off < maps::last_flip_ns() {
        maps::take_accounted(tid)
    } else {
        None
    };
    // SAFETY: as above.
    unsafe { (*open).off_since_ns = 0 };
    // The daemon's own waits (under `--all`): its loop sleeping, not worth
    // the stack walk that keeping them costs at its wakeups.
    if maps::unprofiled_off_cpu(sched_info::pid(next)) {
        return None;
    }
    if let Some(until) = accounted
        && until > off
    {
        start += until - off;
        if now <= start + u64::from(keep_after) {
            return None;
        }
    }
    let entry = maps::task(next);
    // Noting its waker (`--wakers`) delayed its wakeup: without that delay
    // the interval may not have outlasted its threshold.
    if let Some(entry) = entry
        && let Some(delay) = waker::delay(entry, off)
    {
        start += delay.min(now - start);
        if now <= start + u64::from(keep_after) {
            return None;
        }
    }
    let state = ThreadState::off_cpu(left_with);
    let queued = sched_info::queued_since(next, run_delay_out, now);
    let (blocked, runqueue) = split_interval(state == ThreadState::Runqueue, start, now, queued);
    let (rate, naive) = maps::off_cpu_rule();
    let d = now - start;
    maps::count(Stat::OffCpuEventsKept, 1);
    let entry = entry?;
    let blocked = weigh_part(blocked, d, rate, naive);
    let runqueue = weigh_part(runqueue, d, rate, naive);
    if park(next, entry, off, state as u32, blocked, runqueue) {
        NonNull::new(entry)
    } else {
        None
    }
}

/// Kept weight of an interval of `next` that began at `off` waits in its
/// `entry` for the user stack, which only the thread's own context can
/// read: true when a task work is to take it (the caller schedules it).
fn park(
    next: *mut task_struct,
    entry: *mut TaskState,
    off: u64,
    state: u32,
    blocked: Option<Weight>,
    runqueue: Option<Weight>,
) -> bool {
    // SAFETY: `entry` comes from a successful map lookup and stays valid
    // for this program's run.
    unsafe {
        if let Some(w) = blocked {
            (*entry).blocked_ns += w.time_ns;
            (*entry).blocked_count += w.count;
            (*entry).pending_state = state;
        }
        if let Some(w) = runqueue {
            (*entry).runqueue_ns += w.time_ns;
            (*entry).runqueue_count += w.count;
        }
        if (*entry).pending != 0 {
            return false;
        }
        let slot = maps::active_slot();
        let (kernel_stack, err) = stack::capture_task_kernel(next.cast(), &slot);
        (*entry).kernel_stack = kernel_stack;
        (*entry).kernel_stack_err = err;
        waker::mark(entry, off);
        (*entry).pending = 1;
        interval_cell::mirror_pending((*entry).tid, true);
        add_pending(1);
        // Not for a thread that never returns to user space (its task
        // work would never run). Without a task work the weight waits for
        // `rseq_update` or the next switch-out.
        !sched_info::stays_in_kernel(next)
    }
}

//! `--wakers`: who woke a thread whose interval is kept (see
//! `profiler_common::waker`).
//!
//! - `sched_waking` runs in the waker's context (or in the interrupt that
//!   wakes: a timer, a disk's completion). For a target thread off the CPU
//!   whose interval has already outlasted the threshold drawn at its
//!   switch-out, or will if it waits [`SLACK_NS`] more for a CPU, the
//!   waker is noted in the woken thread's task storage: its ids, name and
//!   both stacks. Every other wakeup costs the target check and a
//!   comparison.
//! - The switch-in keeps the interval ([`super::keep`]) and marks the
//!   waker as the pending weight's if it woke this very interval
//!   ([`mark`]); the flush stores the record in the slot's wakers map and
//!   names it in the blocked weight's key ([`name_in`]).
use aya_ebpf::{
    bindings::task_struct,
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    programs::BtfTracePointContext,
};
use profiler_common::{
    sample::{COMM_LEN, SampleKey},
    stack::NO_STACK,
    stats::Stat,
    task::TaskState,
    waker::{self, WakerRecord, record_hash},
};

use super::interval_cell;
use crate::{
    maps::{self, Scratch},
    stack, target, unwind,
};

/// sched_waking(task_struct *p): `p` is being woken by the current context.
pub fn on_waking(ctx: &BtfTracePointContext) {
    if maps::off_cpu_dispatch_only() {
        return;
    }
    let woken: *mut task_struct = ctx.arg(0);
    let Some(tid) = target::candidate(woken) else {
        return;
    };
    let open = if let Some(cell) = interval_cell::owned(tid) {
        // SAFETY: a pointer from a successful array lookup, valid for this
        // program's run.
        unsafe { &raw const (*cell).open }
    } else {
        let Some(entry) = maps::task(woken) else {
            return;
        };
        // SAFETY: as above, for a task storage value.
        unsafe { &raw const (*entry).open }
    };
    // SAFETY: `open` points into a map value, valid for this run. Its
    // owner's switches write it on another CPU: a torn read can only make
    // the check below fail, or note a waker that `mark` then refuses.
    let (off, keep_after) = unsafe { ((*open).off_since_ns, (*open).keep_after_ns) };
    if off == 0 {
        return;
    }
    if let Some(now) = likely_kept(off, keep_after) {
        note(ctx, woken, off, now);
    }
}

/// How much longer than its threshold an interval may seem at its wakeup
/// and still be kept: the wait for a CPU after the wakeup counts in the
/// interval, and the wakeup's clock (ktime) is not quite the switch's (the
/// run queue's). Without it, a 35 µs disk read, kept when its threshold
/// fell in the 10 µs between wakeup and switch-in, lost its waker 4 times
/// in 10. A wakeup whose interval turns out not kept wastes its record:
/// about one in `rate / SLACK_NS` wakeups of short waits (0.2% at the
/// default 10 ms). At 100 µs, a ping-pong's 180,000 wakeups a second took
/// 1% of them, and `sched_waking` averaged 203 ns a run.
const SLACK_NS: u64 = 20_000;

/// The time now (ktime), when an interval that began at `off` with
/// threshold `keep_after` has outlasted it, or nearly ([`SLACK_NS`]): its
/// switch-in is likely to keep it.
#[inline(always)]
fn likely_kept(off: u64, keep_after: u32) -> Option<u64> {
    // SAFETY: bpf_ktime_get_ns has no preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    (now + SLACK_NS > off + u64::from(keep_after)).then_some(now)
}

/// Notes the current context as the waker of `woken`'s interval that
/// began at `off`, and how long that took from `since` (ktime): the
/// wakeup waits for it. Out of line: rare.
#[inline(never)]
fn note(ctx: &BtfTracePointContext, woken: *mut task_struct, off: u64, since: u64) {
    let Some(entry) = maps::task(woken) else {
        return;
    };
    let pid_tgid = bpf_get_current_pid_tgid();
    let pid = (pid_tgid >> 32) as u32;
    #[expect(clippy::cast_possible_truncation, reason = "the low half is the tid")]
    let tid = pid_tgid as u32;
    let slot = maps::active_slot();
    let (kernel_stack, kernel_stack_err) =
        stack::capture_current(ctx, &slot, 0, Stat::KernelStackErrors, Scratch::Waking);
    // A waker outside the targets has no unwind tables here, nor mappings
    // the daemon reads: its kernel stack and name only.
    let (user_stack, user_stack_err) = if tid != 0 && target::is(pid) {
        let (stack, err, _) =
            unwind::capture_user(&slot, pid, maps::runtimes(pid), Scratch::Waking);
        (stack, err)
    } else {
        (NO_STACK, 0)
    };
    // SAFETY: `entry` comes from a successful map lookup and stays valid
    // for this program's run. Field by field: no record on the BPF stack.
    unsafe {
        let record = &mut (*entry).waker;
        record.pid = pid;
        record.tid = tid;
        record.user_stack = user_stack;
        record.user_stack_err = user_stack_err;
        record.kernel_stack = kernel_stack;
        record.kernel_stack_err = kernel_stack_err;
        record.comm = bpf_get_current_comm().unwrap_or([0; COMM_LEN]);
        (*entry).waker_interval = off;
        let delay = bpf_ktime_get_ns().saturating_sub(since);
        (*entry).waker_delay_ns = u32::try_from(delay).unwrap_or(u32::MAX);
    }
    maps::count(Stat::WakersNoted, 1);
}

/// How long noting a waker delayed the wakeup of `entry`'s interval that
/// began at `off`, if one was noted for it.
#[inline(always)]
pub fn delay(entry: *mut TaskState, off: u64) -> Option<u64> {
    // SAFETY: `entry` comes from a successful map lookup and stays valid
    // for this program's run; the waker wrote it before the wakeup.
    unsafe { ((*entry).waker_interval == off).then(|| u64::from((*entry).waker_delay_ns)) }
}

/// The switch-in keeps the interval that began at `off`, whose blocked
/// weight becomes pending in `entry`: its waker is that weight's if it
/// woke this interval.
#[inline(always)]
pub fn mark(entry: *mut TaskState, off: u64) {
    // SAFETY: `entry` comes from a successful map lookup and stays valid
    // for this program's run.
    unsafe {
        (*entry).waker_pending = u8::from(maps::wakers() && (*entry).waker_interval == off);
    }
}

/// Names the waker of `entry`'s pending blocked weight in `key`: its
/// record's hash once stored in the slot's map, or [`waker::UNKNOWN`].
/// Without `--wakers`, [`waker::NONE`]. Out of line: its locals stay off
/// the flush's frame, which the walk of the user stack sits on (6.1's
/// verifier allows 512 bytes for a whole call chain).
#[inline(never)]
pub fn name_in(key: &mut SampleKey, entry: *mut TaskState, slot: &maps::Slot, blocked_ns: u64) {
    if !maps::wakers() {
        key.waker = waker::NONE;
        return;
    }
    // SAFETY: `entry` comes from a successful map lookup and stays valid
    // for this program's run.
    let record: &WakerRecord = unsafe { &(*entry).waker };
    key.waker = waker::UNKNOWN;
    // SAFETY: as above.
    if unsafe { (*entry).waker_pending } != 0 {
        let hash = record_hash(record);
        if maps::store_waker(slot, hash, record) {
            key.waker = hash;
        }
    }
    if key.waker == waker::UNKNOWN {
        maps::count(Stat::WakersUnknownNs, blocked_ns);
    }
}

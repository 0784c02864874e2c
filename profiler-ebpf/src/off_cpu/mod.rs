//! Off-CPU time: how long target threads stay off the CPU, and why.
//!
//! - Switch-out (sched_switch, in the leaving thread's context): note the
//!   time (the run queue's clock, `clock.rs`), the state it leaves in and
//!   the scheduler's run-queue total, in the thread's interval cell
//!   (`interval_cell.rs`; its task storage if another thread owns the
//!   cell). Cheap: no stack is captured, and no helper is called unless
//!   the thread is new or has weight to flush.
//!   The sampling rule's random draw is taken here too: the threshold
//!   the interval must outlast to be kept (profiler_common::off_cpu).
//! - Switch-in (sched_switch, `next`): the interval's length is known. If
//!   it did not outlast its threshold, which is the fate of nearly every
//!   short interval, that comparison is all. A kept interval is split by
//!   the scheduler's own accounting into the time spent waiting for a CPU
//!   (`sched_info`, no wakeup hook needed) and the rest, blocked; the
//!   parts share the interval's weight. Only then is a stack captured:
//!   the kernel stack of `next` right there with bpf_get_task_stack, and
//!   the weight is parked in the task's entry as pending (`keep.rs`).
//! - The user stack can only be read in the thread's own context, so the
//!   pending weight is flushed (`flush.rs`) the first time the thread
//!   runs a hook of its own:
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
//!   - Its next switch-out (with its task work scheduled, one where it
//!     blocks: a preempted thread leaves the flush to it), or its exit.
//!     For a thread that has not returned to user space since (still in
//!     the same system call) the stack is exact. Without task work, for a
//!     thread without rseq that ran user code in between (Go, static musl)
//!     it is where the thread blocks next: an approximation, counted as
//!     `OffCpuNsApproxUserStack`.
//! - The name and tid the samples are labelled with are kept current at
//!   renames and exec (`thread_identity.rs`), and a thread's cell is freed
//!   at its exit.
use aya_ebpf::{
    bindings::task_struct,
    helpers::{bpf_get_current_comm, bpf_get_prandom_u32},
    programs::BtfTracePointContext,
};
use aya_log_ebpf::warn;
use profiler_common::{
    off_cpu::{threshold, xorshift_next},
    sample::COMM_LEN,
    sched::SwitchCpu,
    stats::Stat,
    task::{OpenInterval, TaskState},
};

mod clock;
mod flush;
mod interval_cell;
mod keep;
mod task_work;
mod thread_identity;
mod waker;

pub use flush::{Flush, on_exit, on_return_to_user};
pub use thread_identity::{on_exec, on_rename};
pub use waker::on_waking;

use self::{clock::Clock, flush::flush};
use crate::{maps, sched_info, target};

/// `TASK_DEAD`: the thread's last switch-out, after `sched_process_exit`.
const TASK_DEAD: u32 = 0x80;

/// sched_switch(bool preempt, task_struct *prev, task_struct *next,
/// unsigned int prev_state).
///
/// The hot path, run on every switch of the machine, is kept short and
/// in one piece: `prev` then `next`, each passed over at once unless it
/// may be profiled, and everything that is rare (a thread's first
/// switch, a kept interval) out of line, in BPF subprograms of its own.
/// Its cost per switch is BENCHMARKS.md's section 3.
pub fn on_switch(ctx: &BtfTracePointContext) {
    if maps::off_cpu_dispatch_only() {
        return;
    }
    let mut clock = Clock::new();
    let prev: *mut task_struct = ctx.arg(1);
    if let Some(tid) = target::candidate(prev) {
        let preempt: u64 = ctx.arg(0);
        let prev_state: u64 = ctx.arg(3);
        // A preempted thread is runnable whatever its state bits say.
        #[expect(clippy::cast_possible_truncation, reason = "an unsigned int argument")]
        let left_with = if preempt & 0xff != 0 {
            0
        } else {
            prev_state as u32
        };
        switch_out(ctx, prev, tid, left_with, &mut clock);
    }
    let next: *mut task_struct = ctx.arg(2);
    if let Some(tid) = target::candidate(next) {
        switch_in(next, tid, &mut clock);
    }
}

/// `prev`, thread `tid`, which may be profiled, leaves the
/// CPU with state bits `left_with` (see [`OpenInterval::left_with`]). A
/// thread that owns its interval cell is a target (and stays one until it
/// exits): it is noted there without a helper call. Other threads take
/// [`untracked_open`].
fn switch_out(
    ctx: &BtfTracePointContext,
    prev: *mut task_struct,
    tid: u32,
    left_with: u32,
    clock: &mut Clock,
) {
    // Its last switch: sched_process_exit flushed it and freed its cell.
    if left_with & TASK_DEAD != 0 {
        return;
    }
    let open = if let Some(cell) = interval_cell::owned(tid) {
        // SAFETY: `cell` comes from a successful array lookup and stays
        // valid for this program's run.
        unsafe {
            if (*cell).pending != 0
                && let Some(entry) = maps::task(prev)
                && flushes_at_switch_out(entry, left_with)
            {
                flush(entry, Flush::Later);
            }
            &raw mut (*cell).open
        }
    } else {
        let Some(open) = untracked_open(ctx, prev, tid, left_with) else {
            return;
        };
        open
    };
    // Every field is read first and the interval written whole: the reads
    // are volatile, and writes between them would stay one field each.
    let now = clock.now(prev);
    let cpu = maps::switch_cpu();
    let interval = OpenInterval {
        off_since_ns: clock::to_ktime(now, cpu),
        off_since_clock: now,
        run_delay_ns: sched_info::run_delay(prev),
        left_with,
        keep_after_ns: draw_threshold(cpu),
    };
    // SAFETY: `open` points into a map value from a successful lookup or
    // insert, valid for this program's run, as does `cpu` into this CPU's
    // entry of a per-CPU array.
    unsafe {
        open.write(interval);
        if let Some(cpu) = cpu {
            (*cpu).off_cpu_seen += 1;
        }
    }
}

/// Where `prev`, thread `tid` without a cell of its own,
/// notes its interval, if it is a target: its task storage is created on
/// its first switch-out, and any weight still pending there is flushed
/// (as [`flushes_at_switch_out`] says). Out of line: a thread only comes
/// here while its cell is taken.
#[inline(never)]
fn untracked_open(
    ctx: &BtfTracePointContext,
    prev: *mut task_struct,
    tid: u32,
    left_with: u32,
) -> Option<*mut OpenInterval> {
    let entry = tracked_entry(ctx, prev, tid)?;
    if flushes_at_switch_out(entry, left_with) {
        flush(entry, Flush::Later);
    }
    Some(interval_home(entry, tid))
}

/// Whether weight still pending in `entry`, for a thread that leaves the
/// CPU with `left_with`, is flushed at this switch-out. Not when it was
/// preempted (`left_with` 0) with its task work scheduled: it has not
/// blocked again, and the task work flushes on its way back to user
/// space. That way back is where a woken thread is often preempted,
/// before its task work runs (the return to user space reschedules
/// first): flushed here, the stack was still the exact one, but counted
/// as approximate (a Go thread parked for a whole run put its 4 s there,
/// about one run in ten with two busy loops beside it). Without task work
/// (none scheduled, or none on this kernel) a preempted thread is flushed
/// here, so that one that never blocks again still is.
#[inline(always)]
fn flushes_at_switch_out(entry: *mut TaskState, left_with: u32) -> bool {
    // SAFETY: `entry` comes from a successful map lookup and stays valid
    // for this program's run.
    left_with != 0 || unsafe { (*entry).work_scheduled } == 0
}

/// The task storage of `prev`, thread `tid`, created on its first
/// switch-out if its process is a target.
fn tracked_entry(
    ctx: &BtfTracePointContext,
    prev: *mut task_struct,
    tid: u32,
) -> Option<*mut TaskState> {
    if let Some(entry) = maps::task(prev) {
        return Some(entry);
    }
    let pid = sched_info::pid(prev);
    if !target::is(pid) {
        return None;
    }
    let entry = maps::track_task(prev);
    if let Some(entry) = entry {
        // SAFETY: `entry` comes from a successful lookup or insert and
        // stays valid for this program's run; a new one is all zeros.
        unsafe {
            (*entry).pid = pid;
            (*entry).tid = tid;
            (*entry).comm = bpf_get_current_comm().unwrap_or([0; COMM_LEN]);
        }
    }
    if entry.is_none() {
        // Rare (an allocation failure) and counted; the log says which.
        warn!(
            ctx,
            "off-CPU: thread {} of {} not tracked: no task storage", tid, pid
        );
    } else if interval_cell::claim(tid).is_none() {
        maps::count(Stat::IntervalCellTaken, 1);
    }
    entry
}

/// Where a tracked thread without a cell of its own notes its interval:
/// its cell, if it is free now (claimed from here on), else `entry`.
fn interval_home(entry: *mut TaskState, tid: u32) -> *mut OpenInterval {
    // SAFETY: `entry` comes from a successful map lookup or insert and
    // stays valid for this program's run, as does a claimed cell.
    unsafe {
        if let Some(cell) = interval_cell::claim(tid) {
            // Closed: the cell's interval is the one in use from now on.
            (*entry).open.off_since_ns = 0;
            return &raw mut (*cell).open;
        }
        &raw mut (*entry).open
    }
}

/// `next`, thread `tid`, comes back: an interval that outlasted its
/// threshold is kept ([`kept`]).
fn switch_in(next: *mut task_struct, tid: u32, clock: &mut Clock) {
    let open = if let Some(cell) = interval_cell::owned(tid) {
        // SAFETY: a pointer from a successful array lookup, valid for this
        // program's run.
        unsafe { &raw mut (*cell).open }
    } else {
        let Some(entry) = maps::task(next) else {
            return;
        };
        // SAFETY: as above, for a task storage value.
        unsafe { &raw mut (*entry).open }
    };
    let now = clock.now(next);
    // SAFETY: `open` points into a map value from a successful lookup,
    // valid for this program's run.
    unsafe {
        if (*open).off_since_ns == 0 {
            return;
        }
        // Dropped (or empty): the common case, one comparison.
        if now <= (*open).off_since_clock + u64::from((*open).keep_after_ns) {
            (*open).off_since_ns = 0;
            return;
        }
    }
    if let Some(entry) = keep::interval(next, tid, open, now) {
        // Here, not in `keep::interval`: the task work's callback (the
        // flush, the walk) adds its frames to those of the function that
        // names it, and Linux 6.1's verifier sums them within 512 bytes
        // (`profiler-userspace/src/bpf/stack_tests.rs`).
        let entry = entry.as_ptr();
        // SAFETY: `next` is the tp_btf argument; `entry` its task
        // storage value, valid for this program's run.
        unsafe {
            if task_work::schedule(next, (*entry).tid) {
                (*entry).work_scheduled = 1;
            }
        }
    }
}

/// The sampling rule's threshold for an interval that begins now
/// (profiler_common::off_cpu::threshold), from this CPU's random state in
/// `cpu`. Without it (never: a per-CPU array's index 0) every interval is
/// kept: costly, never biased.
#[inline(always)]
fn draw_threshold(cpu: Option<*mut SwitchCpu>) -> u32 {
    let Some(cpu) = cpu else {
        return 0;
    };
    // SAFETY: a pointer into this CPU's entry of a per-CPU array, valid for
    // this run; only sched_switch, with interrupts off, uses it.
    let rand = unsafe { random(&mut (*cpu).random) };
    threshold(maps::off_cpu_rate(), rand)
}

/// 32 random bits from this CPU's xorshift64* `state`: an inline step,
/// where `bpf_get_prandom_u32` would be a helper call on every switch-out.
/// The state is seeded from the kernel's pool on first use.
#[inline(always)]
fn random(state: &mut u64) -> u32 {
    if *state == 0 {
        // SAFETY: bpf_get_prandom_u32 has no preconditions.
        let (high, low) = unsafe { (bpf_get_prandom_u32(), bpf_get_prandom_u32()) };
        *state = ((u64::from(high) << 32) | u64::from(low)) | 1;
    }
    xorshift_next(state)
}

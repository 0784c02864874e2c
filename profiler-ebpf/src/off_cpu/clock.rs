//! Timestamps of a context switch without a helper call.
//!
//! `bpf_ktime_get_ns` is a helper call and a clocksource read, the
//! costliest step of a tracked switch. The scheduler has just updated the run queue's
//! own clock (`rq->clock`, what `sched_info` counts in) when
//! `sched_switch` fires, so durations are measured in that clock, read off
//! the task like the run-queue accounting (`sched_info::rq_clock`). The
//! one exception is the scheduler's own: a switch that follows a wakeup at
//! once (the woken thread preempts, or wakes an idle CPU) skips the update,
//! so it is timed at the wakeup, as schedstat times it (README).
//!
//! Only the window logic needs ktime (the daemon's flips are
//! `CLOCK_MONOTONIC`): for it, a run-queue clock reading is converted with
//! this CPU's offset between the two clocks, measured again with one
//! `bpf_ktime_get_ns` at most every [`SYNC_PERIOD_NS`]. The conversion is
//! off by the age of the `rq->clock` update (sub-microsecond) plus the
//! drift since the last measurement; it only decides in which window a
//! boundary-crossing interval's time lands, never how long it was.
use aya_ebpf::{bindings::task_struct, helpers::bpf_ktime_get_ns};
use profiler_common::sched::SwitchCpu;

use crate::sched_info;

/// How often each CPU measures the offset between the clocks again.
const SYNC_PERIOD_NS: u64 = 100_000_000;

/// The switch's run-queue clock, read once and only if a tracked thread
/// needs it: most switches on a machine involve no target.
pub struct Clock(u64);

impl Clock {
    #[inline(always)]
    pub const fn new() -> Self {
        Self(0)
    }

    /// This CPU's run-queue clock, read through `task`, which must be on
    /// this CPU's run queue (`prev` or `next` of the switch).
    #[inline(always)]
    pub fn now(&mut self, task: *mut task_struct) -> u64 {
        if self.0 == 0 {
            self.0 = sched_info::rq_clock(task);
        }
        self.0
    }
}

/// `clock`, a reading of this CPU's run-queue clock, as ktime, with this
/// CPU's offset in `cpu` (its [`SwitchCpu`]); measured with a helper call
/// without one.
#[inline(always)]
pub fn to_ktime(clock: u64, cpu: Option<*mut SwitchCpu>) -> u64 {
    let Some(sync) = cpu else {
        // SAFETY: bpf_ktime_get_ns has no preconditions.
        return unsafe { bpf_ktime_get_ns() };
    };
    // SAFETY: a pointer into this CPU's entry of a per-CPU array, valid for
    // this run; only sched_switch, with interrupts off, uses it.
    unsafe {
        let at = (*sync).clock_synced_at;
        if at == 0 || clock.wrapping_sub(at) > SYNC_PERIOD_NS {
            (*sync).clock_offset_ns = bpf_ktime_get_ns().wrapping_sub(clock);
            (*sync).clock_synced_at = clock;
        }
        clock.wrapping_add((*sync).clock_offset_ns)
    }
}

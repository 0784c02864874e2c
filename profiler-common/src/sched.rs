//! The scheduler's own run-queue accounting, read straight from
//! `task_struct` instead of hooking `sched_wakeup`.
//!
//! With `CONFIG_SCHED_INFO` (which `/proc/<pid>/schedstat` needs) the kernel
//! keeps, per thread, `sched_info.run_delay` (total time spent runnable on
//! a run queue, waits already over) and `sched_info.last_queued` (when the
//! current wait began; 0 when none is open), both in the run queue's clock
//! (`rq->clock`). At the `sched_switch` tracepoint `next` has not yet been
//! accounted: `sched_info_arrive` runs later in `context_switch`, so its
//! current wait is `rq->clock - last_queued`, with the clock as the
//! scheduler is about to read it for that accounting. A migration between run queues closes one wait into
//! `run_delay` and opens another, so the two together are every run-queue
//! wait since the thread left the CPU.
//!
//! The eBPF side cannot use CO-RE, so the daemon resolves the fields'
//! offsets from the kernel's BTF and hands them over as a load-time global.

/// Byte offsets of the fields read, resolved from `/sys/kernel/btf/vmlinux`:
/// the scheduler's accounting, and the thread's own ids.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedOffsets {
    /// `task_struct.sched_info.run_delay`.
    pub run_delay: u32,
    /// `task_struct.sched_info.last_queued`.
    pub last_queued: u32,
    /// `task_struct.se.cfs_rq`: the CFS run queue the thread is on, from
    /// which the CPU's run queue is reached (`CONFIG_FAIR_GROUP_SCHED`).
    pub cfs_rq: u32,
    /// `cfs_rq.rq`.
    pub rq: u32,
    /// `rq.clock`.
    pub clock: u32,
    /// `task_struct.pid`: the thread id, which `sched_switch` reads to
    /// pass over threads that are not profiled without a helper call.
    pub pid: u32,
    /// `task_struct.tgid`: the process id, for the same.
    pub tgid: u32,
    /// `task_struct.flags`: `PF_*`, to tell threads that never return to
    /// user space (kernel threads, io_uring workers).
    pub flags: u32,
}

#[cfg(feature = "user")]
// SAFETY: eight u32s, no padding, every bit pattern valid.
unsafe impl aya::Pod for SchedOffsets {}

/// One CPU's entry of [`crate::maps::SWITCH_CPU`]: what `sched_switch`
/// keeps per CPU. Only that program writes it, with interrupts off.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchCpu {
    /// `ktime - rq->clock` (wrapping) when last measured (`profiler-ebpf`'s
    /// `off_cpu/clock.rs`).
    pub clock_offset_ns: u64,
    /// The run-queue clock then; 0 before the first measurement.
    pub clock_synced_at: u64,
    /// The off-CPU rule's xorshift64* state; 0 until first use.
    pub random: u64,
    /// Off-CPU intervals begun on this CPU: the `off_cpu_events_seen`
    /// statistic, which the daemon adds to `STATS`' total. Counted here
    /// because the switch-out has this entry at hand: a `STATS` update
    /// was one more per-CPU lookup on every tracked switch.
    pub off_cpu_seen: u64,
}

#[cfg(feature = "user")]
// SAFETY: four u64s, no padding, every bit pattern valid.
unsafe impl aya::Pod for SwitchCpu {}

/// Run-queue time of a thread between its switch-out and now, its
/// switch-in: the waits closed since (`run_delay_now - run_delay_out`) plus
/// the one ending now (`clock - last_queued`, if one is open).
#[must_use]
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub fn queued_ns(run_delay_out: u64, run_delay_now: u64, last_queued: u64, clock: u64) -> u64 {
    let closed = run_delay_now.saturating_sub(run_delay_out);
    let open = if last_queued == 0 {
        0
    } else {
        clock.saturating_sub(last_queued)
    };
    closed + open
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_ns_adds_closed_and_open_waits() {
        assert_eq!(queued_ns(1_000, 1_000, 5_000, 5_300), 300, "one open wait");
        assert_eq!(
            queued_ns(1_000, 1_200, 5_000, 5_300),
            500,
            "a migration closed 200 ns before the open wait"
        );
        assert_eq!(queued_ns(1_000, 1_000, 0, 5_300), 0, "no wait open");
        assert_eq!(
            queued_ns(1_000, 1_000, 5_400, 5_300),
            0,
            "a clock behind last_queued (another CPU's) gives no open wait"
        );
    }
}

//! Counters the kernel keeps so that nothing is dropped silently.
//!
//! [`crate::maps::STATS`] is a per-CPU array of `u64`, indexed by [`Stat`].
//! The counters only ever grow; userspace reports per-window deltas.

/// Index of a counter in [`crate::maps::STATS`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stat {
    /// `perf_event` samples that matched the target filter.
    OnCpuSamples = 0,
    /// User stacks that could not be captured (errno other than EFAULT,
    /// which means "no user context").
    UserStackErrors = 1,
    /// Kernel stacks that could not be captured (same exclusion).
    KernelStackErrors = 2,
    /// Stacks not stored because the window's stack map was full (E2BIG;
    /// other refusals count in [`Stat::MapAllocFailed`]).
    StackMapFull = 3,
    /// Samples dropped because the samples map was full (the same).
    MapFull = 4,
    /// Off-CPU intervals of target threads that began (counted when the
    /// thread leaves the CPU, where the rule's threshold is drawn). The
    /// kernel counts them in `SWITCH_CPU` ([`crate::sched::SwitchCpu`]),
    /// which the switch-out holds already; the daemon adds that count to
    /// this slot's, which stays 0.
    OffCpuEventsSeen = 5,
    /// Intervals the sampling rule kept (both state parts of one interval
    /// are kept together).
    OffCpuEventsKept = 6,
    /// Threads not tracked because the task map refused an insert.
    TaskMapFull = 7,
    /// On-CPU samples in the weight dropped on a full samples map.
    LostSamples = 8,
    /// Off-CPU nanoseconds in the weight dropped on a full samples map.
    LostOffCpuNs = 9,
    /// Off-CPU events (fixed point) in the weight dropped on a full map.
    LostOffCpuCount = 10,
    /// User frames unwound with a table row.
    FramesByTable = 11,
    /// User frames unwound by frame pointer (no table for the PC).
    FramesByFramePointer = 12,
    /// User PCs with no table: no mappings for the process yet, a PC
    /// outside every known mapping, a binary without a table (JIT code,
    /// no `.eh_frame`), or a gap in its table.
    PcsWithoutTable = 13,
    /// User stacks cut at the frame limit (they end in `[truncated]`).
    StacksTruncated = 14,
    /// Off-CPU nanoseconds whose user stack was taken at the thread's next
    /// switch-out rather than on its way back to user space: threads not
    /// registered with rseq (Go, static musl) that ran user code in
    /// between, so the stack is where they blocked next (an approximation).
    OffCpuNsApproxUserStack = 15,
    /// New entries in the samples maps. Since the last drain, this is the
    /// active slot's fill, which the daemon watches to drain early.
    SampleEntries = 16,
    /// New entries in the stack maps (the same, for stacks).
    StackEntries = 17,
    /// Tracked threads whose interval cell another thread owned when they
    /// were first seen, so their switches look their task storage up.
    IntervalCellTaken = 18,
    /// Python frames recorded in user stacks.
    PythonFrames = 19,
    /// Python frame chains that could not be read to their end (the stack
    /// ends in `[truncated]` below the frames read).
    PythonChainsTorn = 20,
    /// Stacks that reached a Python eval loop of a thread whose thread
    /// state was not found (the loop stays a native frame).
    PythonThreadsNotFound = 21,
    /// Java frames recorded in user stacks (compiled and interpreted).
    JavaFrames = 22,
    /// PCs in a JVM's code cache whose code blob was not found (freed, or
    /// the segment map changed under the walk): the walk ends there.
    JavaBlobsNotFound = 23,
    /// OpenTelemetry thread-context records attached to a sampled thread
    /// that were not read: not marked valid (being written, or another
    /// version's), or out of reach. The sample keeps no trace or span.
    ThreadCtxInvalid = 24,
    /// Requests to name a runtime's frame or read its label set (Java
    /// frames, Python code objects, Go label sets) that the request map
    /// refused: asked again the next time the walk records the same one.
    RuntimeRequestsLost = 25,
    /// Samples whose thread context record's attributes were gone from
    /// `THREAD_ATTRS` when drained (more distinct sets than it holds): the
    /// sample keeps its trace and span. The daemon counts them at the
    /// drain; the kernel's slot stays 0.
    ThreadAttrsLost = 26,
    /// Wakers noted (`--wakers`): wakeups of intervals already past their
    /// threshold.
    WakersNoted = 27,
    /// Waker records the slot's wakers map refused (full): their weight
    /// shows under `[woken by unknown]`.
    WakersLost = 28,
    /// Blocked weight flushed with no waker noted for its interval (shown
    /// under `[woken by unknown]`), in off-CPU nanoseconds.
    WakersUnknownNs = 29,
    /// Sample or stack entries the kernel could not allocate (ENOMEM: the
    /// window's maps allocate per entry, which can fail in the sampling
    /// interrupt) while the map was not full: lost as a full map's are,
    /// counted apart so that a full map is not blamed.
    MapAllocFailed = 30,
    /// Kept intervals whose task work could not be scheduled (no entry
    /// for it, or the kernel refused: no memory for its context, or still
    /// busy) on a kernel that has it: their weight waits for the thread's
    /// next switch-out or its exit, where the user stack is exact only if
    /// the thread has not returned to user space since.
    TaskWorkUnscheduled = 31,
    /// User mappings found through the file they map
    /// ([`crate::unwind::by_file`]) and walked by its table: mappings of a
    /// process whose own were not published yet (its first samples) or
    /// mapped since they were.
    MappingsByFile = 32,
    /// User stacks walked in part by those mappings: samples and waits of
    /// a process whose own mappings were not read yet (its runtimes' frames,
    /// Python's or Java's, are not known then), or past code mapped since.
    StacksByFile = 33,
    /// Goroutine wakeups recorded by `runtime.ready`'s probe
    /// (`--goroutine-wakers`; [`crate::go_wake`]).
    GoWakesNoted = 34,
}

/// The errno (negated) a hash map insert returns when the map is full.
const E2BIG: i32 = 7;

impl Stat {
    /// The counter of a map insert refused with `err` (a negative errno):
    /// `full` when the map was full, else [`Stat::MapAllocFailed`] (no
    /// memory for the entry).
    #[must_use]
    pub const fn of_refusal(err: i32, full: Self) -> Self {
        if err == -E2BIG {
            full
        } else {
            Self::MapAllocFailed
        }
    }

    /// Every counter, in index order.
    pub const ALL: [Self; 35] = [
        Self::OnCpuSamples,
        Self::UserStackErrors,
        Self::KernelStackErrors,
        Self::StackMapFull,
        Self::MapFull,
        Self::OffCpuEventsSeen,
        Self::OffCpuEventsKept,
        Self::TaskMapFull,
        Self::LostSamples,
        Self::LostOffCpuNs,
        Self::LostOffCpuCount,
        Self::FramesByTable,
        Self::FramesByFramePointer,
        Self::PcsWithoutTable,
        Self::StacksTruncated,
        Self::OffCpuNsApproxUserStack,
        Self::SampleEntries,
        Self::StackEntries,
        Self::IntervalCellTaken,
        Self::PythonFrames,
        Self::PythonChainsTorn,
        Self::PythonThreadsNotFound,
        Self::JavaFrames,
        Self::JavaBlobsNotFound,
        Self::ThreadCtxInvalid,
        Self::RuntimeRequestsLost,
        Self::ThreadAttrsLost,
        Self::WakersNoted,
        Self::WakersLost,
        Self::WakersUnknownNs,
        Self::MapAllocFailed,
        Self::TaskWorkUnscheduled,
        Self::MappingsByFile,
        Self::StacksByFile,
        Self::GoWakesNoted,
    ];

    /// Name used in logs and profile comments.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::OnCpuSamples => "on_cpu_samples",
            Self::UserStackErrors => "user_stack_errors",
            Self::KernelStackErrors => "kernel_stack_errors",
            Self::StackMapFull => "stack_map_full_drops",
            Self::MapFull => "map_full_drops",
            Self::OffCpuEventsSeen => "off_cpu_events_seen",
            Self::OffCpuEventsKept => "off_cpu_events_kept",
            Self::TaskMapFull => "task_map_full_drops",
            Self::LostSamples => "lost_samples",
            Self::LostOffCpuNs => "lost_off_cpu_ns",
            Self::LostOffCpuCount => "lost_off_cpu_count",
            Self::FramesByTable => "frames_by_table",
            Self::FramesByFramePointer => "frames_by_frame_pointer",
            Self::PcsWithoutTable => "pcs_without_table",
            Self::StacksTruncated => "stacks_truncated",
            Self::OffCpuNsApproxUserStack => "off_cpu_ns_approx_user_stack",
            Self::SampleEntries => "sample_entries",
            Self::StackEntries => "stack_entries",
            Self::IntervalCellTaken => "interval_cell_taken",
            Self::PythonFrames => "python_frames",
            Self::PythonChainsTorn => "python_chains_torn",
            Self::PythonThreadsNotFound => "python_threads_not_found",
            Self::JavaFrames => "java_frames",
            Self::JavaBlobsNotFound => "java_blobs_not_found",
            Self::ThreadCtxInvalid => "thread_ctx_records_invalid",
            Self::RuntimeRequestsLost => "runtime_requests_lost",
            Self::ThreadAttrsLost => "thread_ctx_attrs_lost",
            Self::WakersNoted => "wakers_noted",
            Self::WakersLost => "wakers_lost",
            Self::WakersUnknownNs => "wakers_unknown_ns",
            Self::MapAllocFailed => "map_alloc_failures",
            Self::TaskWorkUnscheduled => "off_cpu_task_work_unscheduled",
            Self::MappingsByFile => "unwind_mappings_by_file",
            Self::StacksByFile => "unwind_stacks_by_file",
            Self::GoWakesNoted => "goroutine_wakes_noted",
        }
    }
}

/// Number of entries in [`crate::maps::STATS`].
#[expect(clippy::cast_possible_truncation, reason = "a handful of counters")]
pub const STATS_LEN: u32 = Stat::ALL.len() as u32;

/// One value per counter, indexed by [`Stat`] as `usize` (an array as long
/// as [`Stat::ALL`], which has no `Default` past 32 entries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatCounts(pub [u64; STATS_LEN as usize]);

impl Default for StatCounts {
    fn default() -> Self {
        Self([0; STATS_LEN as usize])
    }
}

impl core::ops::Deref for StatCounts {
    type Target = [u64; STATS_LEN as usize];
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl core::ops::DerefMut for StatCounts {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_map_is_told_from_an_allocation_failure() {
        assert_eq!(Stat::of_refusal(-7, Stat::MapFull), Stat::MapFull);
        assert_eq!(Stat::of_refusal(-7, Stat::StackMapFull), Stat::StackMapFull);
        assert_eq!(Stat::of_refusal(-12, Stat::MapFull), Stat::MapAllocFailed);
    }

    #[test]
    fn all_lists_every_counter_in_index_order_with_distinct_names() {
        for (i, stat) in Stat::ALL.iter().enumerate() {
            assert_eq!(*stat as usize, i, "{stat:?}");
            assert!(
                Stat::ALL[..i].iter().all(|s| s.name() != stat.name()),
                "{stat:?}"
            );
        }
    }
}

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
    /// Stacks not stored because the window's stack map was full.
    StackMapFull = 3,
    /// Samples dropped because the samples map was full.
    MapFull = 4,
}

impl Stat {
    /// Every counter, in index order.
    pub const ALL: [Self; 5] = [
        Self::OnCpuSamples,
        Self::UserStackErrors,
        Self::KernelStackErrors,
        Self::StackMapFull,
        Self::MapFull,
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
        }
    }
}

/// Number of entries in [`crate::maps::STATS`].
#[expect(clippy::cast_possible_truncation, reason = "a handful of counters")]
pub const STATS_LEN: u32 = Stat::ALL.len() as u32;

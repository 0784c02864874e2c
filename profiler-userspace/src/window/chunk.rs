//! A window, or a chunk of one, before symbolization: the kernel's
//! entries and the rows and facts the pipeline attaches to them.
use std::sync::Arc;

use profiler_common::stats::{STATS_LEN, Stat};

use crate::{
    bpf::{Drained, InFlightStats},
    process::recorded::{RecordStats, RecordedImage},
    runtimes::RuntimeFacts,
    sample::{MapEntries, RawSample},
    symbolize::{KernelSymbol, ProcessSnapshot},
};

/// Everything the kernel recorded in one window.
#[derive(Clone, Debug, Default)]
pub struct RawWindow {
    pub samples: Vec<RawSample>,
    /// Per-window increase of each kernel counter, indexed by [`Stat`].
    pub stats: [u64; STATS_LEN as usize],
    /// Entries whose state field this build does not know (skipped).
    pub unknown_entries: u64,
    /// What the accounting of still-open off-CPU intervals added.
    pub in_flight: InFlightStats,
    /// Entries the drained maps held (the most of any chunk, once merged).
    pub map_entries: MapEntries,
    /// Chunks drained early because a map was filling up.
    pub early_drains: u64,
    /// Processes' mappings read while they lived (first seen, exec), for
    /// those gone by the window's end.
    pub processes: Vec<Arc<ProcessSnapshot>>,
    /// Images that ended (exit, exec) as the kernel's mmap records told
    /// them, for processes that lived too briefly to be read.
    pub recorded: Vec<Arc<RecordedImage>>,
    /// Kernel code loaded (BPF programs), oldest first.
    pub kernel_symbols: Vec<KernelSymbol>,
    /// What following the mmap records counted.
    pub record_stats: RecordStats,
    /// What the language runtimes' reads found and counted.
    pub runtimes: RuntimeFacts,
}

impl RawWindow {
    #[must_use]
    pub fn stat(&self, stat: Stat) -> u64 {
        self.stats[stat as usize]
    }
}

impl From<Drained> for RawWindow {
    fn from(drained: Drained) -> Self {
        Self {
            samples: drained.samples,
            stats: drained.stats,
            unknown_entries: drained.unknown_entries,
            map_entries: drained.map_entries,
            ..Self::default()
        }
    }
}

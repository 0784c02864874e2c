//! A window, or a chunk of one, before symbolization: the sources' rows
//! and what they found besides. Built only by the collector
//! (`collector.rs`) and summed only by `merge.rs`; everything else reads
//! it.
use std::sync::Arc;

use profiler_common::stats::{Stat, StatCounts};

use crate::{
    bpf::InFlightStats,
    process::{
        recorded::{RecordStats, RecordedImage},
        snapshot::ProcessSnapshot,
    },
    runtimes::{RuntimeFacts, java::NamedFrame, python::PythonCode},
    sample::{KernelSymbol, RawSample},
};

/// Everything the sources recorded in one chunk or window.
#[derive(Clone, Debug, Default)]
pub struct RawWindow {
    pub(super) samples: Vec<RawSample>,
    /// Per-window increase of each kernel counter, indexed by [`Stat`].
    pub(super) stats: StatCounts,
    /// Entries whose state field this build does not know (skipped).
    pub(super) unknown_entries: u64,
    /// What the accounting of still-open off-CPU intervals added.
    pub(super) in_flight: InFlightStats,
    /// Chunks drained early because a map was filling up.
    pub(super) early_drains: u64,
    /// Processes' mappings read while they lived (first seen, exec), for
    /// those gone by the window's end.
    pub(super) processes: Vec<Arc<ProcessSnapshot>>,
    /// Images that ended (exit, exec) as the kernel's mmap records told
    /// them, for processes that lived too briefly to be read.
    pub(super) recorded: Vec<Arc<RecordedImage>>,
    /// Kernel code loaded (BPF programs), oldest first.
    pub(super) kernel_symbols: Vec<KernelSymbol>,
    /// What following the mmap records counted.
    pub(super) record_stats: RecordStats,
    /// What the language runtimes' reads found and counted.
    pub(super) runtimes: RuntimeFacts,
    /// Python code objects read (their names) since the last chunk.
    pub(super) python_codes: Vec<Arc<PythonCode>>,
    /// Java frames named (while their JVMs ran) since the last chunk.
    pub(super) java_names: Vec<Arc<NamedFrame>>,
}

impl RawWindow {
    /// The rows, kernel's and runtimes'.
    #[must_use]
    pub fn samples(&self) -> &[RawSample] {
        &self.samples
    }

    /// Keeps only the rows `keep` says.
    pub fn retain_samples(&mut self, keep: impl FnMut(&RawSample) -> bool) {
        self.samples.retain(keep);
    }

    /// Whether nothing at all was recorded: no row, no kernel counter.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty() && self.stats.iter().all(|&s| s == 0)
    }

    #[must_use]
    pub fn stat(&self, stat: Stat) -> u64 {
        self.stats[stat as usize]
    }

    /// Entries whose state field this build does not know (skipped).
    #[must_use]
    pub fn unknown_entries(&self) -> u64 {
        self.unknown_entries
    }

    #[must_use]
    pub fn in_flight(&self) -> InFlightStats {
        self.in_flight
    }

    #[must_use]
    pub fn early_drains(&self) -> u64 {
        self.early_drains
    }

    /// Processes' mappings read while they lived.
    #[must_use]
    pub fn processes(&self) -> &[Arc<ProcessSnapshot>] {
        &self.processes
    }

    /// Images of processes gone, as the mmap records told them.
    #[must_use]
    pub fn recorded(&self) -> &[Arc<RecordedImage>] {
        &self.recorded
    }

    #[must_use]
    pub fn kernel_symbols(&self) -> &[KernelSymbol] {
        &self.kernel_symbols
    }

    #[must_use]
    pub fn record_stats(&self) -> RecordStats {
        self.record_stats
    }

    /// Python code objects read while their processes ran.
    #[must_use]
    pub fn python_codes(&self) -> &[Arc<PythonCode>] {
        &self.python_codes
    }

    /// Java frames named while their JVMs ran.
    #[must_use]
    pub fn java_names(&self) -> &[Arc<NamedFrame>] {
        &self.java_names
    }

    #[must_use]
    pub fn runtimes(&self) -> &RuntimeFacts {
        &self.runtimes
    }
}

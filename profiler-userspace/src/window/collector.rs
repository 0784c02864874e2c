//! The one owner of a chunk while it is being filled: each source hands
//! the collector what it found (the kernel's drain, the intervals still
//! open, the processes seen, the runtimes' rows), and the pipeline, the
//! daemon and the on-demand profiles take the finished chunk.
use std::sync::Arc;

use super::chunk::RawWindow;
use crate::{
    bpf::{Drained, InFlightStats},
    mapping_events::Recorded,
    process::snapshot::ProcessSnapshot,
    runtimes::{RuntimeFacts, java::NamedFrame, python::PythonCode},
    sample::{MapEntries, RawSample},
};

/// A chunk being filled.
#[derive(Debug)]
pub struct ChunkCollector {
    chunk: RawWindow,
    /// What the kernel's maps held when drained (their fill, for
    /// `/metrics`).
    map_entries: MapEntries,
}

impl ChunkCollector {
    /// Starts a chunk from the kernel's drained entries; `early` if it was
    /// drained because a map was filling up.
    #[must_use]
    pub fn drained(drained: Drained, early: bool) -> Self {
        let Drained {
            samples,
            stats,
            unknown_entries,
            map_entries,
        } = drained;
        Self {
            chunk: RawWindow {
                samples,
                stats,
                unknown_entries,
                early_drains: u64::from(early),
                ..RawWindow::default()
            },
            map_entries,
        }
    }

    /// What the kernel's maps held.
    #[must_use]
    pub fn map_entries(&self) -> MapEntries {
        self.map_entries
    }

    /// The parts of off-CPU intervals still open at the chunk's end.
    pub fn add_in_flight(&mut self, open: Vec<RawSample>, stats: InFlightStats) {
        self.chunk.samples.extend(open);
        self.chunk.in_flight = stats;
    }

    /// The processes read while they lived, and what the mmap records
    /// told of processes gone and kernel code loaded.
    pub fn add_processes(&mut self, snapshots: Vec<Arc<ProcessSnapshot>>, recorded: Recorded) {
        self.chunk.processes = snapshots;
        self.chunk.recorded = recorded.images;
        self.chunk.kernel_symbols = recorded.kernel_symbols;
        self.chunk.record_stats = recorded.stats;
    }

    /// The Python code objects read since the last chunk.
    pub fn add_python_codes(&mut self, codes: Vec<Arc<PythonCode>>) {
        self.chunk.python_codes = codes;
    }

    /// The chunk's rows so far (the kernel's, and open intervals').
    #[must_use]
    pub fn samples(&self) -> &[RawSample] {
        &self.chunk.samples
    }

    /// The kernel's rows, to label.
    pub fn samples_mut(&mut self) -> &mut [RawSample] {
        &mut self.chunk.samples
    }

    /// The chunk's Java frames, named while their JVMs ran.
    pub fn add_java_names(&mut self, names: Vec<Arc<NamedFrame>>) {
        self.chunk.java_names = names;
    }

    /// The language runtimes' rows, and what their reads found.
    pub fn add_runtimes(&mut self, rows: Vec<RawSample>, facts: RuntimeFacts) {
        self.chunk.samples.extend(rows);
        self.chunk.runtimes = facts;
    }

    /// The chunk, filled.
    #[must_use]
    pub fn finish(self) -> RawWindow {
        self.chunk
    }
}

/// Windows made for tests, with only the parts a test sets.
#[cfg(test)]
impl RawWindow {
    pub(crate) fn of_samples(samples: Vec<RawSample>) -> Self {
        Self {
            samples,
            ..Self::default()
        }
    }

    pub(crate) fn with_stat(mut self, stat: profiler_common::stats::Stat, value: u64) -> Self {
        self.stats[stat as usize] = value;
        self
    }
}

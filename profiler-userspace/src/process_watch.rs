//! Reads processes' mappings while they live. The kernel asks for a
//! process when it first samples it (no mappings published for it) and
//! when it execs (`UNWIND_REQUESTS`), and rings the daemon; at once, the
//! unwinder reads `/proc/PID/maps` for each, builds and publishes tables
//! (without tables under `--unwind frame-pointer`), and a
//! [`ProcessSnapshot`] of the same mappings, with their build ids, is kept
//! for the symbolizer. A process that starts and exits within a window is
//! symbolized from it.
//!
//! Processes that come and go faster than that (under `--all` and
//! `--comm`) are followed from the kernel's mmap records
//! (`mapping_events/`), whose ended images go with each chunk too, as do
//! the kernel's records of BPF programs loaded (always).
use std::sync::Arc;

use crate::{
    bpf::{KernelError, UnwindMaps},
    config::{Target, Unwind},
    mapping_events::{MappingEvents, Recorded},
    process::{build_ids::BuildIds, snapshot::ProcessSnapshot},
    unwind::{Published, Unwinder},
};

pub struct ProcessWatch {
    unwinder: Unwinder,
    /// Snapshots taken since the last [`ProcessWatch::take_snapshots`].
    snapshots: Vec<Arc<ProcessSnapshot>>,
    /// The kernel's mmap records, when targets can appear at any time.
    events: Option<MappingEvents>,
    /// The build ids of the files mapped, for the snapshots.
    build_ids: BuildIds,
}

impl ProcessWatch {
    /// Starts watching, with the `--pid` targets already read (and their
    /// tables in the kernel, so their first samples are walked by table).
    /// It follows the kernel's records of kernel symbols, and with
    /// `record_mappings` (targets that appear at any time: `--all`,
    /// `--comm`) its mmap records too; where they cannot be opened, it
    /// says so and goes on without.
    ///
    /// # Errors
    /// When the kernel maps cannot be written.
    pub fn start(
        unwind: Unwind,
        targets: &Target,
        record_mappings: bool,
        kernel: &mut impl UnwindMaps<Error = KernelError>,
    ) -> Result<Self, KernelError> {
        let unwinder = match unwind {
            Unwind::Tables { rows } => Unwinder::new(rows),
            Unwind::FramePointers => Unwinder::without_tables(),
        };
        let events = MappingEvents::open(record_mappings)
            .inspect_err(|e| {
                let lacking = if record_mappings {
                    "processes that live less than 200 ms, and BPF programs loaded from now on,"
                } else {
                    "BPF programs loaded from now on"
                };
                tracing::warn!("{lacking} will lack names: {}", crate::error_chain(e));
            })
            .ok();
        let mut watch = Self {
            unwinder,
            snapshots: Vec::new(),
            events,
            build_ids: BuildIds::default(),
        };
        if let Target::Pids(pids) = targets {
            for &pid in pids {
                if watch.unwinder.publish(kernel, pid)? == Published::Anew {
                    watch.snapshot(pid);
                }
            }
        }
        Ok(watch)
    }

    /// Serves the kernel's requests when it rings; returns the processes
    /// whose mappings were read anew (first seen, or exec'd).
    ///
    /// # Errors
    /// When the kernel maps cannot be read or written.
    pub fn serve_rung(
        &mut self,
        kernel: &mut impl UnwindMaps<Error = KernelError>,
    ) -> Result<Vec<u32>, KernelError> {
        let published = self.unwinder.serve_rung(kernel)?;
        self.snapshot_all(&published);
        Ok(published)
    }

    /// Serves the kernel's requests, forgets exited processes and reads
    /// the mmap records (every poll); returns what
    /// [`ProcessWatch::serve_rung`] does.
    ///
    /// # Errors
    /// When the kernel maps cannot be read or written.
    pub fn serve(
        &mut self,
        kernel: &mut impl UnwindMaps<Error = KernelError>,
    ) -> Result<Vec<u32>, KernelError> {
        let published = self.unwinder.serve_requests(kernel)?;
        self.snapshot_all(&published);
        self.unwinder.forget_exited(kernel)?;
        if let Some(events) = &mut self.events {
            events.read();
        }
        Ok(published)
    }

    /// The snapshots taken since the last call, for the next chunk.
    pub fn take_snapshots(&mut self) -> Vec<Arc<ProcessSnapshot>> {
        std::mem::take(&mut self.snapshots)
    }

    /// What the kernel's records told since the last call, for the next
    /// chunk: images recorded to their end, kernel symbols, the counts.
    pub fn take_recorded(&mut self) -> Recorded {
        self.events
            .as_mut()
            .map(MappingEvents::take)
            .unwrap_or_default()
    }

    /// The unwinder's counters as profile comments (none without tables).
    #[must_use]
    pub fn comments(&self) -> Vec<String> {
        if self.unwinder.builds_tables() {
            self.unwinder.stats().comments()
        } else {
            Vec::new()
        }
    }

    fn snapshot_all(&mut self, pids: &[u32]) {
        for &pid in pids {
            self.snapshot(pid);
        }
    }

    fn snapshot(&mut self, pid: u32) {
        if let Some(mappings) = self.unwinder.stamped_mappings(pid) {
            let snapshot = ProcessSnapshot::read(pid, mappings, &mut self.build_ids);
            self.snapshots.push(Arc::new(snapshot));
        }
    }
}

//! Reads processes' mappings while they live. The kernel asks for a
//! process when it first samples it (no mappings published for it) and
//! when it execs (`UNWIND_REQUESTS`); every 200 ms the unwinder reads
//! `/proc/PID/maps` for each, builds and publishes tables (without tables
//! under `--unwind frame-pointer`), and a [`ProcessSnapshot`] of the same
//! mappings, with their build ids, is kept for the symbolizer. A process
//! that starts and exits within a window is symbolized from it.
use std::sync::Arc;

use crate::{
    bpf::{Kernel, KernelError},
    config::{Target, Unwind},
    symbolize::ProcessSnapshot,
    unwind::Unwinder,
};

pub struct ProcessWatch {
    unwinder: Unwinder,
    /// Snapshots taken since the last [`ProcessWatch::take_snapshots`].
    snapshots: Vec<Arc<ProcessSnapshot>>,
}

impl ProcessWatch {
    /// Starts watching, with the `--pid` targets already read (and their
    /// tables in the kernel, so their first samples are walked by table).
    ///
    /// # Errors
    /// When the kernel maps cannot be written.
    pub fn start(
        unwind: Unwind,
        targets: &Target,
        kernel: &mut Kernel,
    ) -> Result<Self, KernelError> {
        let unwinder = match unwind {
            Unwind::Tables { rows } => Unwinder::new(rows),
            Unwind::FramePointers => Unwinder::without_tables(),
        };
        let mut watch = Self {
            unwinder,
            snapshots: Vec::new(),
        };
        if let Target::Pids(pids) = targets {
            for &pid in pids {
                if watch.unwinder.publish(kernel, pid)? {
                    watch.snapshot(pid);
                }
            }
        }
        Ok(watch)
    }

    /// Serves the kernel's requests.
    ///
    /// # Errors
    /// When the kernel maps cannot be read or written.
    pub fn serve(&mut self, kernel: &mut Kernel) -> Result<(), KernelError> {
        for pid in self.unwinder.serve(kernel)? {
            self.snapshot(pid);
        }
        Ok(())
    }

    /// The snapshots taken since the last call, for the next chunk.
    pub fn take_snapshots(&mut self) -> Vec<Arc<ProcessSnapshot>> {
        std::mem::take(&mut self.snapshots)
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

    fn snapshot(&mut self, pid: u32) {
        if let Some(vmas) = self.unwinder.mappings(pid) {
            self.snapshots
                .push(Arc::new(ProcessSnapshot::read(pid, vmas.to_vec())));
        }
    }
}

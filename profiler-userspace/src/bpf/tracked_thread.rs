//! A tracked thread's kernel state as the end-of-window accounting
//! (`in_flight.rs`) reads it: its task storage entry, through a pidfd of
//! the thread, and its open interval, in its cell of `INTERVAL_CELLS` if it
//! owns that cell, else in the entry.
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};

use aya::maps::{Array, MapData};
use profiler_common::{
    maps::{INTERVAL_CELLS, TASKS, interval_cell},
    task::{IntervalCell, OpenInterval, TaskState},
};

use super::{error::KernelError, task_storage};

/// What the kernel's entry for a thread says.
pub(super) enum ThreadEntry {
    Tracked(Box<TrackedThread>),
    /// No entry, or the thread is gone.
    Untracked,
    /// The kernel cannot give a thread's pidfd (before Linux 6.9): whether
    /// it is tracked is unknown, so it is left alone.
    Unreadable,
}

/// A target thread the kernel tracks, and the handle to read it again.
pub(super) struct TrackedThread {
    pub tid: u32,
    pidfd: OwnedFd,
    pub state: TaskState,
    /// Its open interval, from its cell or its entry.
    pub open: OpenInterval,
}

/// `INTERVAL_CELLS` and how many of its cells the kernel uses.
pub(super) struct Cells<'a> {
    pub map: Array<&'a mut MapData, IntervalCell>,
    pub in_use: u32,
}

impl Cells<'_> {
    /// Thread `tid`'s open interval: in its cell if it owns it, else in
    /// its `entry`.
    fn open(&self, tid: u32, entry: &TaskState) -> Result<OpenInterval, KernelError> {
        let cell = self
            .map
            .get(&interval_cell(tid, self.in_use), 0)
            .map_err(KernelError::map(INTERVAL_CELLS))?;
        Ok(if cell.owner == u64::from(tid) {
            cell.open
        } else {
            entry.open
        })
    }
}

impl TrackedThread {
    /// Thread `tid`'s entry in `tasks` and its open interval; `None` if
    /// it has no entry or is gone.
    pub fn open(
        tasks: BorrowedFd<'_>,
        cells: &Cells<'_>,
        tid: u32,
    ) -> Result<ThreadEntry, KernelError> {
        let pidfd = match task_storage::open_thread(tid) {
            Ok(Some(pidfd)) => pidfd,
            Ok(None) => return Ok(ThreadEntry::Untracked),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| {
                    tracing::warn!(
                        "this kernel has no pidfds for threads (Linux 6.9+): intervals still \
                         open at a window's end are counted when the thread comes back instead"
                    );
                });
                return Ok(ThreadEntry::Unreadable);
            }
            Err(e) => return Err(KernelError::Pidfd(e)),
        };
        let state =
            task_storage::lookup(tasks, pidfd.as_fd()).map_err(KernelError::map_io(TASKS))?;
        let Some(state) = state else {
            return Ok(ThreadEntry::Untracked);
        };
        let open = cells.open(tid, &state)?;
        Ok(ThreadEntry::Tracked(Box::new(Self {
            tid,
            pidfd,
            state,
            open,
        })))
    }

    /// The open interval as it is now; `None` once the thread is gone.
    pub fn reread(
        &self,
        tasks: BorrowedFd<'_>,
        cells: &Cells<'_>,
    ) -> Result<Option<OpenInterval>, KernelError> {
        let Some(state) =
            task_storage::lookup(tasks, self.pidfd.as_fd()).map_err(KernelError::map_io(TASKS))?
        else {
            return Ok(None);
        };
        cells.open(self.tid, &state).map(Some)
    }
}

//! Serving the kernel's requests for mappings: when it rings, at each
//! poll (one serve's batch: `serving/batch.rs`), and forgetting the
//! processes that have exited.
use std::time::Instant;

use profiler_common::process::ProcessSeen;

use super::{Identified, Stamped, Unwinder, waiting::Wait};
use crate::{
    bpf::UnwindMaps,
    cpu_time::{self, Step},
    process::{procfs, roots},
};

mod batch;

pub(super) use batch::INTAKE_EVERY;

/// What serving the kernel's requests did.
#[derive(Debug, Default)]
pub struct Served {
    /// The processes whose mappings were read anew (first seen, or
    /// exec'd).
    pub published: Vec<u32>,
    /// The processes whose requests wait from now (`waiting.rs`), or
    /// that exited before any was read, with what the kernel saw of them:
    /// their name and placement are kept from it.
    pub waiting: Vec<(u32, ProcessSeen)>,
}

/// A process whose mappings were just read anew (or read again after an
/// exec that left them the same), before any of its tables is built.
pub struct Fresh<'a> {
    pub pid: u32,
    /// What the kernel saw of it when it asked (what was seen before, for
    /// a request put back).
    pub seen: ProcessSeen,
    pub mappings: Vec<Identified<'a>>,
}

/// What is told of each batch of requests once every process in it is
/// read, before any table is built, and of each intake of the requests
/// made while it builds: the processes read anew, and those whose
/// requests wait from now or that exited before any was read
/// ([`Served::waiting`]).
pub trait OnRead<M>: FnMut(&mut M, &[Fresh<'_>], &[(u32, ProcessSeen)]) {}

impl<M, F: FnMut(&mut M, &[Fresh<'_>], &[(u32, ProcessSeen)])> OnRead<M> for F {}

impl Unwinder {
    /// Publishes the processes the kernel asked for (at each poll); `read`
    /// as in [`Unwinder::publish`], `on_read` as [`OnRead`].
    ///
    /// # Errors
    /// When the kernel's requests cannot be read.
    pub fn serve_requests<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        mut read: impl FnMut(&mut M, u32, &Stamped<'_>) -> Result<Vec<bool>, M::Error>,
        mut on_read: impl OnRead<M>,
    ) -> Result<Served, M::Error> {
        Ok(self.serve(maps, &mut read, &mut on_read)?.0)
    }

    /// Publishes the processes the kernel asked for when it rang, and puts
    /// back the requests that changed nothing until the next poll. Those
    /// come from PCs outside every mapping that no read of the process
    /// explains (a frame pointer walk gone astray, code outside files):
    /// served at once, they would ring again at the next sample.
    ///
    /// # Errors
    /// When the kernel's requests cannot be read or put back.
    pub fn serve_rung<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        mut read: impl FnMut(&mut M, u32, &Stamped<'_>) -> Result<Vec<bool>, M::Error>,
        mut on_read: impl OnRead<M>,
    ) -> Result<Served, M::Error> {
        let (served, unchanged) = self.serve(maps, &mut read, &mut on_read)?;
        cpu_time::timed(Step::Requests, || {
            unchanged.into_iter().try_for_each(|pid| maps.request(pid))
        })?;
        Ok(served)
    }

    /// Processes whose requests wait now.
    #[must_use]
    pub fn requests_waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Puts back the requests that wait (`waiting.rs`), as the kernel
    /// made them, so that it does not ask (and ring) again meanwhile;
    /// those waiting from now go in `served`. Returns the others, each
    /// with whether it waited.
    fn put_back_waiting<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        taken: Vec<(u32, ProcessSeen)>,
        served: &mut Served,
    ) -> Result<Vec<(u32, ProcessSeen, bool)>, M::Error> {
        let now = Instant::now();
        self.waiting.forget_stale(now);
        let (mut now_due, mut back) = (Vec::with_capacity(taken.len()), Vec::new());
        for (pid, seen) in taken {
            let published = self.processes.contains_key(&pid);
            match self.waiting.wait(pid, &seen, published, now) {
                Wait::No => now_due.push((pid, seen, false)),
                Wait::Due => now_due.push((pid, seen, true)),
                Wait::First => {
                    back.push((pid, seen));
                    self.stats.requests_waited += 1;
                    served.waiting.push((pid, seen));
                }
                Wait::Again => back.push((pid, seen)),
                Wait::Gone { first } => {
                    self.stats.exited_unread += u64::from(!published);
                    if first && !published && roots::seen_as_ours(&seen) {
                        served.waiting.push((pid, seen));
                    }
                }
            }
        }
        if !back.is_empty() {
            maps.put_back(&back)?;
        }
        Ok(now_due)
    }

    /// Forgets the processes that have exited; returns their pids.
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn forget_exited<M: UnwindMaps>(&mut self, maps: &mut M) -> Result<Vec<u32>, M::Error> {
        let gone: Vec<u32> = self
            .processes
            .keys()
            .copied()
            .filter(|&pid| !procfs::exists(pid))
            .collect();
        for &pid in &gone {
            self.forget(maps, pid)?;
        }
        if !gone.is_empty() {
            self.bound_unused(maps)?;
        }
        Ok(gone)
    }
}

#[cfg(test)]
mod tests;

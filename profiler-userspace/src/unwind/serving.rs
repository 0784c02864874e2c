//! Serving the kernel's requests for mappings: when it rings, at each
//! poll, and forgetting the processes that have exited.
use std::time::Instant;

use profiler_common::process::ProcessSeen;

use super::{Published, Stamped, Unwinder, waiting::Wait};
use crate::{
    bpf::UnwindMaps,
    cpu_time::{self, Step},
    process::{procfs, roots},
};

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

impl Unwinder {
    /// Publishes the processes the kernel asked for (at each poll); `read`
    /// as in [`Unwinder::publish`].
    ///
    /// # Errors
    /// When the kernel's requests cannot be read.
    pub fn serve_requests<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        mut read: impl FnMut(&mut M, u32, &Stamped<'_>) -> Result<Vec<bool>, M::Error>,
    ) -> Result<Served, M::Error> {
        Ok(self.serve(maps, &mut read)?.0)
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
    ) -> Result<Served, M::Error> {
        let (served, unchanged) = self.serve(maps, &mut read)?;
        cpu_time::timed(Step::Requests, || {
            unchanged.into_iter().try_for_each(|pid| maps.request(pid))
        })?;
        Ok(served)
    }

    /// Serves the requests: the pids published, and those left unchanged.
    /// A process already gone is neither: put back, its request would be
    /// read again at every ring until the poll (under `--all`, hundreds of
    /// short processes' requests, each failing its `/proc` read anew).
    fn serve<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        read: &mut impl FnMut(&mut M, u32, &Stamped<'_>) -> Result<Vec<bool>, M::Error>,
    ) -> Result<(Served, Vec<u32>), M::Error> {
        let started = Instant::now();
        let (mut served, mut unchanged) = (Served::default(), Vec::new());
        let taken = cpu_time::timed(Step::Requests, || maps.take_requests())?;
        let now_due = cpu_time::timed(Step::Requests, || {
            self.put_back_waiting(maps, taken, &mut served)
        })?;
        let requests: Vec<u32> = now_due.iter().map(|&(pid, ..)| pid).collect();
        if let Some(notice) = &mut self.on_requests {
            notice(&requests);
        }
        let published = &mut served.published;
        for (pid, seen, due) in now_due {
            // What the kernel saw of the process, not how it asked.
            let seen = ProcessSeen {
                deferrable: 0,
                exited: 0,
                ..seen
            };
            // A full mappings map (more processes than it holds under
            // --all) costs that process its table walk, not the daemon.
            match self.publish(maps, pid, read) {
                Ok(Published::Anew) => {
                    self.saw(pid, seen);
                    published.push(pid);
                    self.stats.waited_then_read += u64::from(due);
                }
                // The same mappings, but a process the kernel saw otherwise:
                // it exec'd between the ask and the read (the read saw the
                // new program), and asked again. Snapshotted again.
                Ok(Published::Unchanged) if self.saw_anew(pid, seen) => published.push(pid),
                Ok(Published::Unchanged) => unchanged.push(pid),
                Ok(Published::Gone) => {}
                Err(_) => self.stats.publish_failures += 1,
            }
        }
        if !requests.is_empty() || !served.waiting.is_empty() {
            tracing::debug!(
                requests = requests.len(),
                published = served.published.len(),
                waiting = served.waiting.len(),
                took_us = started.elapsed().as_micros(),
                "served the kernel's mapping requests"
            );
        }
        Ok((served, unchanged))
    }

    /// Keeps what the kernel saw of `pid`, just published at its request
    /// (a request put back carries nothing: what was seen before stays).
    fn saw(&mut self, pid: u32, seen: ProcessSeen) {
        if let Some(process) = self.processes.get_mut(&pid)
            && seen != ProcessSeen::default()
        {
            process.seen = seen;
        }
    }

    /// Keeps what the kernel saw of `pid`, whose mappings did not change,
    /// when it saw something new (not a request put back, which carries
    /// nothing); whether it did.
    fn saw_anew(&mut self, pid: u32, seen: ProcessSeen) -> bool {
        let Some(process) = self.processes.get_mut(&pid) else {
            return false;
        };
        let anew = seen != ProcessSeen::default() && seen != process.seen;
        if anew {
            process.seen = seen;
        }
        anew
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

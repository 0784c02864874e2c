//! Serving the kernel's requests for mappings: when it rings, at each
//! poll, and forgetting the processes that have exited.
use std::time::Instant;

use profiler_common::process::ProcessSeen;

use super::{Published, Stamped, Unwinder};
use crate::{
    bpf::UnwindMaps,
    cpu_time::{self, Step},
    process::procfs,
};

impl Unwinder {
    /// Publishes the processes the kernel asked for (at each poll); `read`
    /// as in [`Unwinder::publish`]. Returns the pids whose mappings were
    /// read anew.
    ///
    /// # Errors
    /// When the kernel's requests cannot be read.
    pub fn serve_requests<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        mut read: impl FnMut(&mut M, u32, &Stamped<'_>) -> Result<(), M::Error>,
    ) -> Result<Vec<u32>, M::Error> {
        Ok(self.serve(maps, &mut read)?.0)
    }

    /// Publishes the processes the kernel asked for when it rang, and puts
    /// back the requests that changed nothing until the next poll. Those
    /// come from PCs outside every mapping that no read of the process
    /// explains (a frame pointer walk gone astray, code outside files):
    /// served at once, they would ring again at the next sample. Returns
    /// the pids whose mappings were read anew.
    ///
    /// # Errors
    /// When the kernel's requests cannot be read or put back.
    pub fn serve_rung<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        mut read: impl FnMut(&mut M, u32, &Stamped<'_>) -> Result<(), M::Error>,
    ) -> Result<Vec<u32>, M::Error> {
        let (published, unchanged) = self.serve(maps, &mut read)?;
        cpu_time::timed(Step::Requests, || {
            unchanged.into_iter().try_for_each(|pid| maps.request(pid))
        })?;
        Ok(published)
    }

    /// Serves the requests: the pids published, and those left unchanged.
    /// A process already gone is neither: put back, its request would be
    /// read again at every ring until the poll (under `--all`, hundreds of
    /// short processes' requests, each failing its `/proc` read anew).
    fn serve<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        read: &mut impl FnMut(&mut M, u32, &Stamped<'_>) -> Result<(), M::Error>,
    ) -> Result<(Vec<u32>, Vec<u32>), M::Error> {
        let started = Instant::now();
        let (mut published, mut unchanged) = (Vec::new(), Vec::new());
        let (requests, seen): (Vec<u32>, Vec<ProcessSeen>) =
            cpu_time::timed(Step::Requests, || maps.take_requests())?
                .into_iter()
                .unzip();
        if let Some(notice) = &mut self.on_requests {
            notice(&requests);
        }
        for (&pid, seen) in requests.iter().zip(seen) {
            // A full mappings map (more processes than it holds under
            // --all) costs that process its table walk, not the daemon.
            match self.publish(maps, pid, read) {
                Ok(Published::Anew) => {
                    self.saw(pid, seen);
                    published.push(pid);
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
        if !requests.is_empty() {
            tracing::debug!(
                requests = requests.len(),
                published = published.len(),
                took_us = started.elapsed().as_micros(),
                "served the kernel's mapping requests"
            );
        }
        Ok((published, unchanged))
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

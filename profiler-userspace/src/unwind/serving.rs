//! Serving the kernel's requests for mappings: when it rings, at each
//! poll, and forgetting the processes that have exited.
use std::time::Instant;

use profiler_common::process::ProcessSeen;

use super::{
    Stamped, Unwinder,
    publishing::{Read, Reading},
    waiting::Wait,
};
use crate::{
    bpf::UnwindMaps,
    cpu_time::{self, Step},
    process::{
        maps::{FileStamp, Vma},
        procfs, roots,
    },
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

/// A process whose mappings were just read anew (or read again after an
/// exec that left them the same), before any of its tables is built.
pub struct Fresh<'a> {
    pub pid: u32,
    /// What the kernel saw of it when it asked (what was seen before, for
    /// a request put back).
    pub seen: ProcessSeen,
    pub mappings: Vec<(&'a Vma, Option<FileStamp>)>,
}

/// What is told of each batch of requests once every process in it is
/// read, before any table is built: the processes read anew, and those
/// whose requests wait from now or that exited before any was read
/// ([`Served::waiting`]).
pub trait OnRead<M>: FnMut(&mut M, &[Fresh<'_>], &[(u32, ProcessSeen)]) {}

impl<M, F: FnMut(&mut M, &[Fresh<'_>], &[(u32, ProcessSeen)])> OnRead<M> for F {}

/// A request due now, read.
struct DueRead {
    pid: u32,
    seen: ProcessSeen,
    waited: bool,
    reading: Reading,
}

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

    /// Serves the requests: the pids published, and those left unchanged.
    /// A process already gone is neither: put back, its request would be
    /// read again at every ring until the poll (under `--all`, hundreds of
    /// short processes' requests, each failing its `/proc` read anew).
    /// Every process asked for is read, and `on_read` told, before any
    /// table is built.
    fn serve<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        read: &mut impl FnMut(&mut M, u32, &Stamped<'_>) -> Result<Vec<bool>, M::Error>,
        on_read: &mut impl OnRead<M>,
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
        let (fresh, again) = self.read_due(now_due, &mut unchanged);
        self.tell_read(maps, &fresh, &again, &served.waiting, on_read);
        served.published.extend(again);
        for DueRead {
            pid,
            seen,
            waited,
            reading,
        } in fresh
        {
            // A full mappings map (more processes than it holds under
            // --all) costs that process its table walk, not the daemon.
            match self.publish_read(maps, pid, reading, read) {
                Ok(()) => {
                    self.saw(pid, seen);
                    served.published.push(pid);
                    self.stats.waited_then_read += u64::from(waited);
                }
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

    /// Reads every process due: those read anew, and those whose mappings
    /// did not change but that the kernel saw otherwise (it exec'd between
    /// the ask and the read, the read saw the new program, and it asked
    /// again: snapshotted again). The rest go in `unchanged`.
    fn read_due(
        &mut self,
        now_due: Vec<(u32, ProcessSeen, bool)>,
        unchanged: &mut Vec<u32>,
    ) -> (Vec<DueRead>, Vec<u32>) {
        let (mut fresh, mut again) = (Vec::with_capacity(now_due.len()), Vec::new());
        for (pid, seen, waited) in now_due {
            // What the kernel saw of the process, not how it asked.
            let seen = ProcessSeen {
                deferrable: 0,
                exited: 0,
                ..seen
            };
            match self.read_anew(pid) {
                Read::Anew(reading) => fresh.push(DueRead {
                    pid,
                    seen,
                    waited,
                    reading,
                }),
                Read::Unchanged if self.saw_anew(pid, seen) => again.push(pid),
                Read::Unchanged => unchanged.push(pid),
                Read::Gone => {}
            }
        }
        (fresh, again)
    }

    /// Tells `on_read` what was read: `fresh` and `again`, and `waiting`.
    fn tell_read<M>(
        &self,
        maps: &mut M,
        fresh: &[DueRead],
        again: &[u32],
        waiting: &[(u32, ProcessSeen)],
        on_read: &mut impl OnRead<M>,
    ) {
        let fresh_seen = |due: &DueRead| {
            if due.seen == ProcessSeen::default() {
                self.seen(due.pid)
            } else {
                due.seen
            }
        };
        let told: Vec<Fresh<'_>> = fresh
            .iter()
            .map(|due| Fresh {
                pid: due.pid,
                seen: fresh_seen(due),
                mappings: due.reading.stamped(),
            })
            .chain(again.iter().filter_map(|&pid| {
                Some(Fresh {
                    pid,
                    seen: self.seen(pid),
                    mappings: self.stamped_mappings(pid)?.collect(),
                })
            }))
            .collect();
        if !told.is_empty() || !waiting.is_empty() {
            on_read(maps, &told, waiting);
        }
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

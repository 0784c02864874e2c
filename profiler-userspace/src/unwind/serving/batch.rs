//! One serve of the kernel's requests for mappings: every process asked
//! for read, and told ([`OnRead`]), before any table is built; then the
//! tables built and the processes published, taking in the requests made
//! meanwhile.
use std::{
    collections::VecDeque,
    sync::mpsc::{self, RecvTimeoutError},
    time::{Duration, Instant},
};

use profiler_common::process::ProcessSeen;

use super::{Fresh, OnRead, Served};
use crate::{
    bpf::UnwindMaps,
    cpu_time::{self, Step},
    process::maps::Vma,
    unwind::{
        Built, Stamped, Unwinder,
        binary::BinaryId,
        publishing::{Read, Reading},
    },
};

/// How long a batch of requests publishes before it takes (and reads) the
/// requests made meanwhile: a table takes milliseconds to build, most of a
/// second for a large binary, and a batch at the daemon's start builds the
/// tables of every binary running. A process started and ended within the
/// batch was read after it, gone (a program in a container with its root).
pub(in crate::unwind) const INTAKE_EVERY: Duration = Duration::from_millis(5);

/// How long a batch takes in requests past the processes of its first
/// take: it runs on the daemon's loop, whose window ends and signals wait
/// for it, and on a host starting new binaries without end every intake
/// would bring more tables to build.
const INTAKE_FOR: Duration = Duration::from_secs(1);

/// One serve's requests: those read and not published yet, and what was
/// served.
struct Batch {
    pending: VecDeque<DueRead>,
    /// The process whose tables are being built, out of `pending`.
    building: Option<u32>,
    /// How many of `pending` its first take brought, not published yet.
    first_left: usize,
    started: Instant,
    /// When requests were last taken.
    taken_at: Instant,
    /// Requests due, in all.
    requests: usize,
    served: Served,
    unchanged: Vec<u32>,
}

impl Batch {
    /// Whether it still takes in requests: until the processes of its
    /// first take are published, or for [`INTAKE_FOR`].
    fn taking_in(&self) -> bool {
        self.first_left > 0 || self.started.elapsed() < INTAKE_FOR
    }

    /// Whether `pid` is read and not published yet.
    fn holds(&self, pid: u32) -> bool {
        self.building == Some(pid) || self.pending.iter().any(|due| due.pid == pid)
    }

    fn new(now: Instant) -> Self {
        Self {
            pending: VecDeque::new(),
            building: None,
            first_left: 0,
            started: now,
            taken_at: now,
            requests: 0,
            served: Served::default(),
            unchanged: Vec::new(),
        }
    }
}

/// A request due now, read.
struct DueRead {
    pid: u32,
    seen: ProcessSeen,
    waited: bool,
    reading: Reading,
}

impl Unwinder {
    /// Serves the requests: the pids published, and those left unchanged.
    /// A process already gone is neither: put back, its request would be
    /// read again at every ring until the poll (under `--all`, hundreds of
    /// short processes' requests, each failing its `/proc` read anew).
    /// Every process asked for is read, and `on_read` told, before any
    /// table is built; while the batch builds and publishes, the requests
    /// made meanwhile are taken and read every [`INTAKE_EVERY`] (during a
    /// table's build, after it, after a process), and published after it.
    pub(super) fn serve<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        read: &mut impl FnMut(&mut M, u32, &Stamped<'_>) -> Result<Vec<bool>, M::Error>,
        on_read: &mut impl OnRead<M>,
    ) -> Result<(Served, Vec<u32>), M::Error> {
        let started = Instant::now();
        let mut batch = Batch::new(started);
        self.take_in(maps, &mut batch, on_read)?;
        batch.first_left = batch.pending.len();
        while let Some(due) = batch.pending.pop_front() {
            batch.building = Some(due.pid);
            self.build_tables(maps, &due, &mut batch, on_read)?;
            self.publish_due(maps, due, read, &mut batch.served);
            batch.building = None;
            batch.first_left = batch.first_left.saturating_sub(1);
            self.take_in_if_due(maps, &mut batch, on_read)?;
        }
        let Batch {
            requests,
            served,
            unchanged,
            ..
        } = batch;
        if requests > 0 || !served.waiting.is_empty() {
            tracing::debug!(
                requests,
                published = served.published.len(),
                waiting = served.waiting.len(),
                took_us = started.elapsed().as_micros(),
                "served the kernel's mapping requests"
            );
        }
        Ok((served, unchanged))
    }

    /// Takes the kernel's requests, reads every process due among them
    /// and tells `on_read`; the processes read anew join the batch's
    /// pending. A process the batch holds already (it asked again before
    /// its publish) is put back, for the next serve to read its mappings
    /// as published.
    fn take_in<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        batch: &mut Batch,
        on_read: &mut impl OnRead<M>,
    ) -> Result<(), M::Error> {
        let taken = cpu_time::timed(Step::Requests, || maps.take_requests())?;
        let (queued, taken): (Vec<_>, Vec<_>) =
            taken.into_iter().partition(|&(pid, _)| batch.holds(pid));
        let waiting_before = batch.served.waiting.len();
        let now_due = cpu_time::timed(Step::Requests, || {
            if !queued.is_empty() {
                maps.put_back(&queued)?;
            }
            self.put_back_waiting(maps, taken, &mut batch.served)
        })?;
        let requests: Vec<u32> = now_due.iter().map(|&(pid, ..)| pid).collect();
        if let Some(notice) = &mut self.on_requests {
            notice(&requests);
        }
        let (fresh, again) = self.read_due(now_due, &mut batch.unchanged);
        let waiting = &batch.served.waiting[waiting_before..];
        self.tell_read(maps, &fresh, &again, waiting, on_read);
        batch.served.published.extend(again);
        batch.pending.extend(fresh);
        batch.requests += requests.len();
        batch.taken_at = Instant::now();
        Ok(())
    }

    /// [`Unwinder::take_in`] when the batch has built or published for
    /// [`INTAKE_EVERY`] since it last took requests, while it takes them
    /// in ([`Batch::taking_in`]).
    fn take_in_if_due<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        batch: &mut Batch,
        on_read: &mut impl OnRead<M>,
    ) -> Result<(), M::Error> {
        if batch.taking_in() && batch.taken_at.elapsed() >= self.intake_every {
            self.take_in(maps, batch, on_read)?;
        }
        Ok(())
    }

    /// Builds the tables `due` needs that were not built yet, taking in
    /// the requests made meanwhile: while the batch takes them in, each
    /// table is built on a thread of its own. A table that fails to be
    /// placed is built again, and counted, at its publish.
    fn build_tables<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        due: &DueRead,
        batch: &mut Batch,
        on_read: &mut impl OnRead<M>,
    ) -> Result<(), M::Error> {
        if !self.tables {
            return Ok(());
        }
        for (vma, id) in due.reading.files() {
            if self.binaries.contains_key(id) {
                continue;
            }
            let built = if batch.taking_in() {
                self.build_taking_in(maps, (due.pid, vma, id), batch, on_read)?
            } else {
                cpu_time::timed(Step::Tables, || Built::read(due.pid, vma, id))
            };
            let kept = cpu_time::timed(Step::Tables, || self.keep_built(maps, id, built));
            if kept.is_err() {
                break;
            }
            self.take_in_if_due(maps, batch, on_read)?;
        }
        Ok(())
    }

    /// Builds the table of the binary `id` that `pid` maps at `vma` on a
    /// thread of its own, and meanwhile takes in the requests made every
    /// [`INTAKE_EVERY`]: a large binary's table takes most of a second.
    fn build_taking_in<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        (pid, vma, id): (u32, &Vma, &BinaryId),
        batch: &mut Batch,
        on_read: &mut impl OnRead<M>,
    ) -> Result<Built, M::Error> {
        std::thread::scope(|scope| {
            let (done, built) = mpsc::channel();
            let builder = std::thread::Builder::new().name("unwind-table".into());
            let spawned = builder.spawn_scoped(scope, move || {
                let built = cpu_time::timed(Step::Tables, || Built::read(pid, vma, id));
                // The receiver waits until it is sent.
                let _ = done.send(built);
            });
            if spawned.is_err() {
                return Ok(cpu_time::timed(Step::Tables, || Built::read(pid, vma, id)));
            }
            // A build that panicked sends nothing: the scope's end raises it.
            while batch.taking_in() {
                let wait = self.intake_every.saturating_sub(batch.taken_at.elapsed());
                match built.recv_timeout(wait) {
                    Ok(built) => return Ok(built),
                    Err(RecvTimeoutError::Timeout) => self.take_in_if_due(maps, batch, on_read)?,
                    Err(RecvTimeoutError::Disconnected) => return Ok(Built::none()),
                }
            }
            Ok(built.recv().unwrap_or_else(|_| Built::none()))
        })
    }

    /// Publishes `due`, its tables built. A full mappings map (more
    /// processes than it holds under `--all`) costs that process its
    /// table walk, not the daemon.
    fn publish_due<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        due: DueRead,
        read: &mut impl FnMut(&mut M, u32, &Stamped<'_>) -> Result<Vec<bool>, M::Error>,
        served: &mut Served,
    ) {
        let DueRead {
            pid,
            seen,
            waited,
            reading,
        } = due;
        match self.publish_read(maps, pid, reading, read) {
            Ok(()) => {
                self.saw(pid, seen);
                served.published.push(pid);
                self.stats.waited_then_read += u64::from(waited);
            }
            Err(_) => self.stats.publish_failures += 1,
        }
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
                mappings: due.reading.identified(self.tables),
            })
            .chain(again.iter().filter_map(|&pid| {
                Some(Fresh {
                    pid,
                    seen: self.seen(pid),
                    mappings: self.identified_mappings(pid)?.collect(),
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
}

//! Language runtimes seen from outside: the one seam a runtime plugs into
//! (the OpenTelemetry profiler's `interpreter/` is the model).
//!
//! A runtime is a [`Runtime`]: it recognises its binaries (`load`, once
//! per file, shared by the processes running it), attaches to a process
//! that runs one (`attach`, its per-process [`RuntimeProcess`]), and each
//! attached process's state is read at a fixed rate into rows of its own,
//! labelled ([`RowLabels`]) and weighted in nanoseconds. The daemon sees
//! only [`Runtimes`]: it tells them the targets and the processes that
//! started or exec'd, and takes their rows and counters with each chunk.
//!
//! - `binaries.rs`: what each file is, loaded once and kept while used;
//! - `watcher.rs`: which targets run a runtime, and one read of each at
//!   every tick (generic over the runtime);
//! - `thread.rs`: the watcher's thread, and what the daemon takes from it;
//! - `remote.rs`: another process's memory, by `process_vm_readv`;
//! - `go/`: Go, whose rows are the goroutine view.
//!
//! Adding a runtime: a folder beside `go/` with a type that implements
//! [`Runtime`], a [`Kind`] for it, and its line in [`Runtimes::start`].
mod binaries;
pub mod go;
pub(crate) mod remote;
mod thread;
mod watcher;

use std::collections::BTreeSet;

use crate::{
    config::Target,
    process::maps::FileId,
    sample::{RawSample, RowLabels, Stack},
};
use thread::RuntimeThread;

/// A language runtime: recognises its binaries and attaches to processes.
pub trait Runtime: Send + 'static {
    /// What one binary of the runtime gives, shared by its processes.
    type Binary: Clone + Send;
    /// One attached process.
    type Process: RuntimeProcess;
    /// Which runtime it is (its counters' names, its thread's name).
    const KIND: Kind;

    /// What `pid`'s executable `file` is: `None` when it is not this
    /// runtime (or cannot be read: one log line says why). Called once per
    /// file while processes run it.
    fn load(&self, pid: u32) -> Option<Self::Binary>;

    /// Starts reading `pid`, which runs `file`, a binary of this runtime.
    fn attach(&self, pid: u32, file: FileId, binary: &Self::Binary) -> Option<Self::Process>;
}

/// One process of a runtime, being read.
pub trait RuntimeProcess: Send {
    type Error: std::error::Error;

    /// One read of the process's units (goroutines), at most `budget` of
    /// them; `rotation` counts the reads so far, for a process with more
    /// units than the budget (each read takes another part of them).
    ///
    /// # Errors
    /// When the read is dropped whole (the process exited, or its list
    /// moved while read).
    fn read(&mut self, budget: usize, rotation: usize) -> Result<Read, Self::Error>;
}

/// What one read of a process found.
#[derive(Debug, Default)]
pub struct Read {
    pub units: Vec<Unit>,
    /// One in how many of the process's units were read: each stands for
    /// this many.
    pub stride: usize,
    /// Units left out because they kept moving while read.
    pub torn: u64,
}

/// One unit of a runtime (a goroutine) that is not running: what it is,
/// and where it stopped.
#[derive(Debug)]
pub struct Unit {
    pub labels: RowLabels,
    pub stack: Stack,
}

/// The runtimes the daemon knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Go,
}

impl Kind {
    pub const ALL: [Self; 1] = [Self::Go];

    /// The names of its [`ReadStats`] counters, in their order.
    #[must_use]
    pub fn counters(self) -> [&'static str; 4] {
        match self {
            Self::Go => [
                "goroutine_reads",
                "goroutine_reads_dropped",
                "goroutines_unwound",
                "goroutines_torn",
            ],
        }
    }

    /// Its reader thread's name.
    #[must_use]
    pub fn thread_name(self) -> &'static str {
        match self {
            Self::Go => "goroutines",
        }
    }
}

/// What the reads of one runtime counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Reads of one process that succeeded.
    pub reads: u64,
    /// Reads dropped whole: the process exited or its list moved mid-read.
    pub dropped: u64,
    /// Units read.
    pub units: u64,
    /// Units left out of a read: they kept moving while read.
    pub torn: u64,
}

impl ReadStats {
    pub fn add(&mut self, other: &Self) {
        self.reads += other.reads;
        self.dropped += other.dropped;
        self.units += other.units;
        self.torn += other.torn;
    }
}

/// What the runtimes add to a chunk besides their rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeFacts {
    /// The processes whose units were read: their threads' off-CPU time
    /// is left out of `wall`, where their units' time is.
    pub wall_pids: BTreeSet<u32>,
    /// Per runtime, in [`Kind::ALL`] order.
    pub stats: [ReadStats; Kind::ALL.len()],
}

impl RuntimeFacts {
    pub fn add(&mut self, other: &Self) {
        self.wall_pids.extend(&other.wall_pids);
        for (total, part) in self.stats.iter_mut().zip(&other.stats) {
            total.add(part);
        }
    }

    /// Every runtime's counters by name, in [`Kind::ALL`] order.
    pub fn counters(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Kind::ALL.iter().zip(&self.stats).flat_map(|(kind, s)| {
            kind.counters()
                .into_iter()
                .zip([s.reads, s.dropped, s.units, s.torn])
        })
    }
}

/// The runtimes being read, each on its thread.
pub struct Runtimes {
    threads: Vec<Box<dyn Reading>>,
}

/// A runtime's thread, whatever the runtime.
trait Reading: Send {
    fn set_target(&self, target: &Target);
    fn notice(&self, pids: &[u32]);
    fn take_into(&self, samples: &mut Vec<RawSample>, facts: &mut RuntimeFacts);
}

impl<R: Runtime> Reading for RuntimeThread<R> {
    fn set_target(&self, target: &Target) {
        RuntimeThread::set_target(self, target);
    }

    fn notice(&self, pids: &[u32]) {
        RuntimeThread::notice(self, pids);
    }

    fn take_into(&self, samples: &mut Vec<RawSample>, facts: &mut RuntimeFacts) {
        let (rows, wall_pids, stats) = self.take();
        samples.extend(rows);
        facts.wall_pids.extend(wall_pids);
        let i = Kind::ALL.iter().position(|&k| k == R::KIND).unwrap_or(0);
        facts.stats[i].add(&stats);
    }
}

impl Runtimes {
    /// Starts reading the runtimes' processes among `target`,
    /// `go_frequency_hz` times a second (`None`: no goroutine view).
    #[must_use]
    pub fn start(go_frequency_hz: Option<u64>, target: &Target) -> Self {
        let mut threads: Vec<Box<dyn Reading>> = Vec::new();
        if let Some(hz) = go_frequency_hz {
            threads.push(Box::new(RuntimeThread::start(go::Go, hz, target)));
        }
        Self { threads }
    }

    /// The targets as they are now.
    pub fn set_target(&self, target: &Target) {
        for thread in &self.threads {
            thread.set_target(target);
        }
    }

    /// Processes `pids` started or exec'd: they are looked at now, not at
    /// the next refresh.
    pub fn notice(&self, pids: &[u32]) {
        if pids.is_empty() {
            return;
        }
        for thread in &self.threads {
            thread.notice(pids);
        }
    }

    /// The rows read since the last call, and what the reads found.
    #[must_use]
    pub fn take(&self) -> (Vec<RawSample>, RuntimeFacts) {
        let mut samples = Vec::new();
        let mut facts = RuntimeFacts::default();
        for thread in &self.threads {
            thread.take_into(&mut samples, &mut facts);
        }
        (samples, facts)
    }
}

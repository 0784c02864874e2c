//! The seam itself: what a runtime implements ([`Runtime`],
//! [`RuntimeProcess`]), what one read of a process gives ([`Read`],
//! [`Unit`]), which runtimes there are ([`Kind`]), and what their reads
//! add to a chunk besides rows ([`RuntimeFacts`]).
use std::collections::BTreeSet;

use crate::{
    process::maps::FileId,
    sample::{RowLabels, Stack, WokenBy},
};

/// A language runtime: recognises its binaries and attaches to processes.
pub trait Runtime: Send + 'static {
    /// What one binary of the runtime gives, shared by its processes.
    type Binary: Clone + Send;
    /// One attached process.
    type Process: RuntimeProcess;
    /// Which runtime it is (its counters' names, its thread's name).
    const KIND: Kind;

    /// What `pid`'s executable `file` is, read through the process.
    /// Called once per file while processes run it, and again after
    /// [`Loaded::NotNow`].
    fn load(&self, pid: u32, file: FileId) -> Loaded<Self::Binary>;

    /// Starts reading `pid`, which runs `file`, a binary of this runtime;
    /// `None` when the process cannot be read now (gone, or caught
    /// mid-exec: its new executable named, not mapped yet): it is tried
    /// again at the watcher's next refresh.
    fn attach(&self, pid: u32, file: FileId, binary: &Self::Binary) -> Option<Self::Process>;
}

/// What a load of a runtime's binary found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded<T> {
    /// A binary of the runtime.
    Runtime(T),
    /// Not one (or one that cannot be read: one log line says why):
    /// remembered for the file.
    Not,
    /// The process no longer runs the file (it exited or exec'd since it
    /// was looked at): nothing is known, and nothing remembered.
    NotNow,
}

/// One process of a runtime, being read.
pub trait RuntimeProcess: Send {
    type Error: std::error::Error;
    /// What tells a unit's row from another's besides its stack (a
    /// goroutine's id, state and wait reason). Rows are summed by it at
    /// every read, so it is compact; its labels are made from it once per
    /// row and chunk ([`RuntimeProcess::labels`]).
    type Key: Clone + Eq + std::hash::Hash + Send;

    /// One read of the process's units (goroutines), at most `budget` of
    /// them; `rotation` counts the reads so far, for a process with more
    /// units than the budget (each read takes another part of them).
    /// `elapsed_ns`: the time since the last read, which each unit read
    /// stands for (times the stride).
    ///
    /// # Errors
    /// When the read is dropped whole (the process exited, or its list
    /// moved while read).
    fn read(
        &mut self,
        budget: usize,
        rotation: usize,
        elapsed_ns: u64,
    ) -> Result<Read<Self::Key>, Self::Error>;

    /// The labels of the rows with `key`.
    fn labels(key: &Self::Key) -> RowLabels;

    /// What ended the wait of the rows with `key`, for rows of
    /// [`Read::ended`]: those rows' time is in other rows already, and
    /// goes only to their waker's twin.
    fn woken_by(_key: &Self::Key) -> Option<WokenBy> {
        None
    }
}

/// What one read of a process found.
#[derive(Debug)]
pub struct Read<K> {
    pub units: Vec<Unit<K>>,
    /// One in how many of the process's units were read: each stands for
    /// this many.
    pub stride: usize,
    /// Units left out because they kept moving while read.
    pub torn: u64,
    /// Waits that ended since the last read, with the time their rows
    /// stood for in earlier reads (keys for which
    /// [`RuntimeProcess::woken_by`] says what ended them).
    pub ended: Vec<(Unit<K>, u64)>,
}

/// One unit of a runtime (a goroutine) that is not running: what it is,
/// and where it stopped.
#[derive(Debug)]
pub struct Unit<K> {
    pub key: K,
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
    pub fn counters(self) -> [&'static str; 5] {
        match self {
            Self::Go => [
                "goroutine_reads",
                "goroutine_reads_dropped",
                "goroutines_unwound",
                "goroutines_torn",
                "goroutine_ticks_late",
            ],
        }
    }

    /// The name of its [`ReadStats::binaries_known`] level.
    #[must_use]
    pub fn binaries_level(self) -> &'static str {
        match self {
            Self::Go => "goroutine_binaries_cached",
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
    /// Ticks that began more than a quarter of a period late.
    pub late_ticks: u64,
    /// Binaries known at a refresh (a level: the largest of those added).
    pub binaries_known: u64,
}

impl ReadStats {
    pub fn add(&mut self, other: &Self) {
        self.reads += other.reads;
        self.dropped += other.dropped;
        self.units += other.units;
        self.torn += other.torn;
        self.late_ticks += other.late_ticks;
        self.binaries_known = self.binaries_known.max(other.binaries_known);
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

    /// Every runtime's levels by name, in [`Kind::ALL`] order.
    pub fn levels(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Kind::ALL
            .iter()
            .zip(&self.stats)
            .map(|(kind, s)| (kind.binaries_level(), s.binaries_known))
    }

    /// Every runtime's counters by name, in [`Kind::ALL`] order.
    pub fn counters(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Kind::ALL.iter().zip(&self.stats).flat_map(|(kind, s)| {
            kind.counters()
                .into_iter()
                .zip([s.reads, s.dropped, s.units, s.torn, s.late_ticks])
        })
    }
}

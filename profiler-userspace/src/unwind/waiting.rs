//! Requests that wait: a process not published yet whose frames the
//! kernel walked, each by its file's table, in files every runtime read
//! and found none of its own (`FileTable::may_wait`, `by_file.rs`;
//! `ProcessSeen::deferrable`), is read only once it has lived [`WAIT`]
//! past the serve that first took its request (such requests do not
//! ring: the 200 ms poll takes them). The kernel marks deferrable only
//! the requests of processes in our mount namespace and root (the
//! `OUR_ROOT` global, [`crate::process::roots::ours_as_seen`]): another's
//! rings, and is read at once.
//! Most processes of a build or a shell script are gone by then, and the
//! kernel marks the request of a process that exits
//! (`ProcessSeen::exited`): their mappings are never read nor published,
//! their tables are there already, their name and placement are taken
//! from the request, and their samples are named from the kernel's mmap
//! records (`mapping_events/`), as for any process gone before its
//! request is served. Only where the records name the right files:
//! targets that appear at any time (the records are kept for them,
//! `--all` and `--comm`), and processes that see files at our paths (our
//! mount namespace and root: a record names a file by the path the
//! process saw).
use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use profiler_common::process::ProcessSeen;

use crate::process::roots;

/// How long after the serve that first took its request a process that
/// may wait is read. A
/// compiler's run of one file or a short command lives less; a process
/// that lives on is walked by its own mappings from then on (the walk by
/// file looks its process's tree up at every frame outside them).
pub const WAIT: Duration = Duration::from_millis(100);

/// Requests first taken longer ago than this and not taken since are
/// forgotten: a request is taken again at every serve until it is due,
/// or dropped as its process's exit mark says, so such a one was lost
/// (a put-back refused, a pid's request replaced).
const FORGET_AFTER: Duration = Duration::from_secs(1);

/// What to do with a request now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Serve it.
    No,
    /// Serve it: it waited, and is due.
    Due,
    /// Put it back: asked for the first time.
    First,
    /// Put it back: still within [`WAIT`] of its first request.
    Again,
    /// Drop it: the process has exited. `first` when its request was not
    /// taken before (its name and placement are still to be kept).
    Gone { first: bool },
}

/// The first request of each process whose request waits.
pub struct Waiting {
    enabled: bool,
    since: HashMap<u32, Instant>,
}

impl Waiting {
    /// Requests wait only when `enabled` (targets whose processes'
    /// images the mmap records keep).
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            since: HashMap::new(),
        }
    }

    /// Whether the request of `pid` (`published`: its mappings are) waits
    /// at `now`.
    pub fn wait(&mut self, pid: u32, seen: &ProcessSeen, published: bool, now: Instant) -> Wait {
        if seen.exited != 0 {
            let first = self.since.remove(&pid).is_none();
            return Wait::Gone { first };
        }
        if !self.enabled || published || seen.deferrable == 0 || !roots::seen_as_ours(seen) {
            self.since.remove(&pid);
            return Wait::No;
        }
        match self.since.get(&pid) {
            None => {
                self.since.insert(pid, now);
                Wait::First
            }
            Some(&since) if now.duration_since(since) < WAIT => Wait::Again,
            Some(_) => {
                self.since.remove(&pid);
                Wait::Due
            }
        }
    }

    /// Forgets the requests not taken again within [`FORGET_AFTER`].
    pub fn forget_stale(&mut self, now: Instant) {
        self.since
            .retain(|_, since| now.duration_since(*since) < FORGET_AFTER);
    }

    /// Requests waiting now.
    pub fn len(&self) -> usize {
        self.since.len()
    }
}

#[cfg(test)]
mod tests;

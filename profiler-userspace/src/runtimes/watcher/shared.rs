//! What a runtime's watcher shares with its owner (`thread.rs`): the rows
//! it read, the targets, and the processes the daemon saw start or exec.
use std::{
    collections::BTreeSet,
    sync::{Mutex, atomic::AtomicBool},
    time::{Duration, Instant},
};

use rustc_hash::FxHashMap;

use crate::{
    config::Target,
    runtimes::seam::{ReadStats, Runtime, RuntimeProcess},
    sample::Stack,
};

/// A process the daemon saw start or exec is looked at once it has lived
/// this long, with the others noticed meanwhile: most processes of a
/// build or a shell script are gone by then (the reader is not woken, and
/// nothing is attached, for each), and a process of the runtime that
/// lives is read from its second or third tick on.
pub(super) const SETTLE: Duration = Duration::from_millis(25);

/// A runtime's row key.
pub(in crate::runtimes) type KeyOf<R> = <<R as Runtime>::Process as RuntimeProcess>::Key;

#[derive(Clone, PartialEq, Eq, Hash)]
pub(in crate::runtimes) struct RowKey<K> {
    pub pid: u32,
    pub key: K,
    pub stack: Stack,
}

pub(in crate::runtimes) struct Collected<K> {
    pub rows: FxHashMap<RowKey<K>, u64>,
    pub pids: BTreeSet<u32>,
    pub stats: ReadStats,
}

impl<K> Default for Collected<K> {
    fn default() -> Self {
        Self {
            rows: FxHashMap::default(),
            pids: BTreeSet::new(),
            stats: ReadStats::default(),
        }
    }
}

/// What the watcher's thread and its owner (`thread.rs`) share.
pub(in crate::runtimes) struct Shared<K> {
    pub collected: Mutex<Collected<K>>,
    pub target: Mutex<Target>,
    /// Processes the daemon saw start or exec, not yet looked at, and
    /// when.
    pub noticed: Mutex<Vec<(u32, Instant)>>,
    pub stop: AtomicBool,
}

impl<K> Shared<K> {
    /// Adds processes the daemon saw start or exec; true when none was
    /// waiting before (the reader must be woken to plan its look).
    pub(in crate::runtimes) fn notice(&self, pids: &[u32]) -> bool {
        let now = Instant::now();
        self.noticed.lock().is_ok_and(|mut noticed| {
            let first = noticed.is_empty();
            noticed.extend(pids.iter().map(|&pid| (pid, now)));
            first
        })
    }

    /// Takes the noticed processes that have lived [`SETTLE`] by `now`;
    /// with when the oldest of those left was noticed.
    pub(super) fn take_settled(&self, now: Instant) -> (BTreeSet<u32>, Option<Instant>) {
        let Ok(mut noticed) = self.noticed.lock() else {
            return (BTreeSet::new(), None);
        };
        let mut settled = BTreeSet::new();
        noticed.retain(|&(pid, at)| {
            let old = now.duration_since(at) >= SETTLE;
            if old {
                settled.insert(pid);
            }
            !old
        });
        let oldest = noticed.iter().map(|&(_, at)| at).min();
        (settled, oldest)
    }
}

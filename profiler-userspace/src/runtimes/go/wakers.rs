//! `--goroutine-wakers`: which goroutine ended each wait the goroutine
//! view saw. The kernel keeps each goroutine's last wakeup (`GO_WAKES`,
//! from the probe on `runtime.ready`, `profiler_common::go_wake`). A
//! goroutine seen parked at one read and then seen otherwise, or woken
//! since (a consumer parks again where it parked before), has ended its
//! wait: the rows it stood for in the reads of that wait are given again,
//! as rows of their own, with its last wakeup if that came after the last
//! read that saw it parked (else the network poller for an `IO wait`,
//! which readies goroutines without `runtime.ready`, and unknown for the
//! others). Without a record, a reader parked on its socket again is not
//! told from one that never left: an `IO wait` is named at every read, by
//! the poller unless a wakeup was recorded (a deadline, a close), so the
//! rows of one that ends by a deadline are the poller's until the last. The reads are 10
//! ms apart at the default rate: a goroutine woken twice between two reads
//! is taken to have been woken by the second waker.
use std::sync::Arc;

use profiler_common::go_wake::GoWake;
use rustc_hash::{FxHashMap, FxHashSet};

use super::{GoroutineKey, g::GoroutineStatus};
use crate::{
    bpf::GoWakeLookup,
    runtimes::seam::Unit,
    sample::{GoroutineWaker, Stack, WokenBy},
};

/// A wait not seen ending for this long (its goroutine exited, or a read
/// of one in N goroutines did not come back to it) ends unknown.
const FORGET_NS: u64 = 2_000_000_000;

/// A wait seen by the reads so far.
struct Pending {
    key: GoroutineKey,
    stack: Stack,
    /// The time its rows stood for.
    weight: u64,
    /// When the last read that saw it began (`CLOCK_MONOTONIC`).
    seen_ns: u64,
}

/// The waits of one process's goroutines.
pub struct Waits {
    pid: u32,
    source: Arc<dyn GoWakeLookup>,
    /// By goroutine id.
    pending: FxHashMap<u64, Pending>,
}

impl Waits {
    #[must_use]
    pub fn new(pid: u32, source: Arc<dyn GoWakeLookup>) -> Self {
        Self {
            pid,
            source,
            pending: FxHashMap::default(),
        }
    }

    /// Follows the waits through a read that began at `now_ns` and found
    /// `units`, each standing for `weight`; `complete` when it read every
    /// goroutine (a goroutine it did not find is running, or gone). Returns
    /// the waits that ended, keyed with what ended them, and their time.
    pub fn after_read(
        &mut self,
        units: &[Unit<GoroutineKey>],
        weight: u64,
        complete: bool,
        now_ns: u64,
    ) -> Vec<(Unit<GoroutineKey>, u64)> {
        let mut ended = Vec::new();
        let mut seen = FxHashSet::default();
        for unit in units {
            let goid = unit.key.goid;
            seen.insert(goid);
            let parked = unit.key.status == GoroutineStatus::Waiting;
            if let Some(pending) = self.pending.get_mut(&goid) {
                let wake = wake_after(&*self.source, self.pid, goid, pending.seen_ns);
                // The poller readies without a record: a reader parked again
                // on its socket looks as if it never left, so an `IO wait`
                // is named at each read.
                if wake.is_none()
                    && parked
                    && pending.key == unit.key
                    && pending.stack == unit.stack
                    && !io_wait(&pending.key)
                {
                    pending.weight += weight;
                    pending.seen_ns = now_ns;
                    continue;
                }
                if let Some(pending) = self.pending.remove(&goid) {
                    ended.push(end(self.pid, pending, wake.as_ref()));
                }
            }
            if parked {
                let pending = Pending {
                    key: unit.key.clone(),
                    stack: unit.stack.clone(),
                    weight,
                    seen_ns: now_ns,
                };
                self.pending.insert(goid, pending);
            }
        }
        let gone: Vec<u64> = self
            .pending
            .iter()
            .filter(|&(goid, p)| {
                !seen.contains(goid) && (complete || now_ns.saturating_sub(p.seen_ns) > FORGET_NS)
            })
            .map(|(&goid, _)| goid)
            .collect();
        for goid in gone {
            if let Some(pending) = self.pending.remove(&goid) {
                let wake = wake_after(&*self.source, self.pid, goid, pending.seen_ns);
                ended.push(end(self.pid, pending, wake.as_ref()));
            }
        }
        ended
    }
}

/// The last wakeup of goroutine `goid` of `pid` if it came after
/// `seen_ns`.
fn wake_after(source: &dyn GoWakeLookup, pid: u32, goid: u64, seen_ns: u64) -> Option<GoWake> {
    source
        .last_wake(pid, goid)
        .filter(|wake| wake.time_ns > seen_ns)
}

/// Whether the rows of `key` wait on a file descriptor.
fn io_wait(key: &GoroutineKey) -> bool {
    key.wait_reason.as_deref() == Some("IO wait")
}

/// The rows of `pending`, a wait of a goroutine of `pid`, keyed with what
/// ended it.
fn end(pid: u32, pending: Pending, wake: Option<&GoWake>) -> (Unit<GoroutineKey>, u64) {
    // A wait on a file descriptor that no `runtime.ready` ended: the
    // network poller readied it (a deadline or a close readies through
    // `ready`, and is recorded).
    let unrecorded = if io_wait(&pending.key) {
        WokenBy::GoPoller
    } else {
        WokenBy::Unknown
    };
    let woken_by = wake.map_or(unrecorded, |wake| {
        WokenBy::Goroutine(Arc::new(GoroutineWaker {
            pid,
            goid: wake.waker_goid,
            stack: if wake.frames().is_empty() {
                Stack::Absent
            } else {
                Stack::Frames(Arc::from(wake.frames()))
            },
        }))
    });
    let key = GoroutineKey {
        woken_by: Some(woken_by),
        ..pending.key
    };
    let unit = Unit {
        key,
        stack: pending.stack,
    };
    (unit, pending.weight)
}

#[cfg(test)]
mod tests;

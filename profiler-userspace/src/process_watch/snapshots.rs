//! The snapshots of the processes that serving the kernel's requests
//! reads (`process/snapshot.rs`), taken as each batch is read, before
//! any of its tables is built.
use std::sync::Arc;

use profiler_common::process::ProcessSeen;

use super::WatchMaps;
use crate::{
    cpu_time::{Step, timed},
    process::snapshot::{Known, ProcessSnapshot},
    unwind::{Fresh, OnRead},
};

/// Snapshots what serving the kernel's requests read, as it is read
/// ([`OnRead`]).
pub(super) fn snapshotter<'a, M: WatchMaps>(
    known: &'a mut Known,
    snapshots: &'a mut Vec<Arc<ProcessSnapshot>>,
) -> impl OnRead<M> + 'a {
    move |kernel, fresh, waiting| snapshot_all(known, snapshots, kernel, fresh, waiting)
}

/// Snapshots the processes whose mappings were read anew, and the name
/// and placement of those whose requests wait from now (their mappings
/// come from the kernel's records if they end first), as one batch of
/// placements (see `process/placements.rs`).
pub(super) fn snapshot_all(
    known: &mut Known,
    snapshots: &mut Vec<Arc<ProcessSnapshot>>,
    kernel: &mut impl WatchMaps,
    fresh: &[Fresh<'_>],
    waiting: &[(u32, ProcessSeen)],
) {
    timed(Step::Snapshots, || {
        let by_set = known.placements.by_set();
        let mut moves = || by_set.then(|| kernel.cgroup_moves().ok()).flatten();
        known.placements.begin(moves());
        let mut taken = Vec::with_capacity(fresh.len() + waiting.len());
        for process in fresh {
            let mappings = process.mappings.iter().cloned();
            taken.push(ProcessSnapshot::read(
                process.pid,
                mappings,
                &process.seen,
                known,
            ));
        }
        for (pid, seen) in waiting {
            let none = std::iter::empty();
            taken.push(ProcessSnapshot::read(*pid, none, seen, known));
        }
        let again = known.placements.end(moves());
        for snapshot in taken.iter_mut().filter(|s| again.contains(&s.pid)) {
            if let Some(placement) = known.placements.read(snapshot.pid) {
                snapshot.placement = Some(placement);
            }
        }
        snapshots.extend(taken.into_iter().map(Arc::new));
    });
}

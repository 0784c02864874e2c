use std::sync::{
    Arc,
    atomic::{AtomicU32, Ordering},
};

use super::*;
use crate::{
    runtimes::seam::{Kind, Read},
    sample::RowLabels,
};

/// A runtime every binary belongs to, whose processes cannot be attached
/// the first `failing` times (caught mid-exec); `attaches` counts tries.
struct MidExec {
    failing: u32,
    attaches: Arc<AtomicU32>,
}

struct Attached;

impl RuntimeProcess for Attached {
    type Error = std::io::Error;
    type Key = u32;

    fn read(
        &mut self,
        _budget: usize,
        _rotation: usize,
        _elapsed_ns: u64,
    ) -> Result<Read<u32>, Self::Error> {
        Ok(Read {
            units: Vec::new(),
            stride: 1,
            torn: 0,
            ended: Vec::new(),
        })
    }

    fn labels(_key: &u32) -> RowLabels {
        RowLabels {
            replaces_thread: false,
            labels: Vec::new(),
        }
    }
}

impl Runtime for MidExec {
    type Binary = ();
    type Process = Attached;
    const KIND: Kind = Kind::Go;

    fn load(&self, _pid: u32, _file: FileId) -> Loaded<()> {
        Loaded::Runtime(())
    }

    fn attach(&self, _pid: u32, _file: FileId, (): &()) -> Option<Attached> {
        let tries = self.attaches.fetch_add(1, Ordering::Relaxed) + 1;
        (tries > self.failing).then_some(Attached)
    }
}

/// A watcher of this test's own process, whose attach fails `failing`
/// times; its attach count.
fn watcher(failing: u32) -> (Watcher<MidExec>, Arc<AtomicU32>, Target) {
    let attaches = Arc::new(AtomicU32::new(0));
    let runtime = MidExec {
        failing,
        attaches: Arc::clone(&attaches),
    };
    let target = Target::Pids(vec![std::process::id()]);
    (Watcher::new(runtime, 100), attaches, target)
}

fn attached(watcher: &Watcher<MidExec>) -> bool {
    watcher
        .processes
        .get(&std::process::id())
        .is_some_and(|w| w.process.is_some())
}

#[test]
fn a_process_caught_mid_exec_is_attached_at_the_next_refresh() {
    let (mut watcher, attaches, target) = watcher(1);
    watcher.refresh(&target, &BTreeSet::new());
    assert!(!attached(&watcher));
    watcher.refresh(&target, &BTreeSet::new());
    assert!(attached(&watcher), "tried again, attached");
    // Attached: its executable unchanged, never tried again.
    watcher.refresh(&target, &BTreeSet::new());
    assert_eq!(attaches.load(Ordering::Relaxed), 2);
}

#[test]
fn a_process_that_never_attaches_is_tried_a_few_times_only() {
    let (mut watcher, attaches, target) = watcher(u32::MAX);
    for _ in 0..3 * ATTACH_TRIES {
        watcher.refresh(&target, &BTreeSet::new());
    }
    assert!(!attached(&watcher));
    assert_eq!(attaches.load(Ordering::Relaxed), ATTACH_TRIES);
}

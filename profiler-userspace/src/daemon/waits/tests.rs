//! The daemon's chores against the kernel's maps in memory
//! (`bpf/in_memory.rs`): the early drain and following the targets.
use std::process::Command;

use profiler_common::sample::ThreadState;

use super::*;
use crate::{bpf::in_memory::MemoryKernel, config::Discover, sample::RawSample};

fn row(tid: u32) -> RawSample {
    crate::testing::row(tid, ThreadState::Running, 1, 0)
}

/// The samples map drains early once three quarters full, and not before.
#[test]
fn a_filling_samples_map_is_drained_early() {
    let mut kernel = MemoryKernel::default();
    let threshold = crate::testing::early_drain_rows();
    for tid in 0..threshold - 1 {
        kernel.record(row(tid));
    }
    assert!(!maps_filling(&kernel).unwrap());
    kernel.record(row(threshold));
    assert!(maps_filling(&kernel).unwrap());
    let flip = kernel.flip().unwrap();
    kernel.drain(&flip).unwrap();
    assert!(!maps_filling(&kernel).unwrap(), "the new slot is empty");
}

/// A pid that is not alive any more.
fn exited_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    child.wait().unwrap();
    child.id()
}

/// An exited `--pid` target leaves the kernel's set; a match the kernel
/// added itself (`--comm`, at exec) is adopted while alive and removed
/// once gone; the run ends when no target is left.
#[test]
fn targets_follow_the_processes() {
    let me = std::process::id();
    let gone = exited_pid();
    let mut targets = Targets::new(&Target::Pids(vec![me, gone]), &Discover::default());
    let mut kernel = MemoryKernel::default();
    kernel.targets.extend([me, gone]);

    let followed = follow_targets(&mut targets, &mut kernel).unwrap();
    assert!(!followed.all_gone);
    assert!(followed.changed, "one exited");
    assert!(followed.added.is_empty());
    assert_eq!(kernel.target_pids().unwrap(), [me]);

    let parent = std::os::unix::process::parent_id();
    let also_gone = exited_pid();
    kernel.targets.extend([parent, also_gone]);
    let followed = follow_targets(&mut targets, &mut kernel).unwrap();
    assert!(!followed.all_gone);
    assert_eq!(
        followed.added,
        [parent],
        "the kernel's live match, for the runtimes"
    );
    let mut both = vec![me, parent];
    both.sort_unstable();
    assert_eq!(
        targets.current(),
        Target::Pids(both),
        "the live match adopted"
    );
    assert!(!kernel.targets.contains(&also_gone));

    let mut only_gone = Targets::new(&Target::Pids(vec![gone]), &Discover::default());
    let mut kernel = MemoryKernel::default();
    kernel.targets.insert(gone);
    assert!(
        follow_targets(&mut only_gone, &mut kernel)
            .unwrap()
            .all_gone
    );
    assert!(kernel.targets.is_empty());
}

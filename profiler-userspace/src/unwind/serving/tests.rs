//! Serving a batch of the kernel's requests: every process read, and told,
//! before its tables are built, and the requests made while the batch
//! publishes read within it.
use std::{cell::RefCell, process::Child, time::Duration};

use profiler_common::process::ProcessSeen;

use crate::{
    bpf::in_memory::MemoryKernel,
    unwind::{Fresh, Unwinder, tests::maps},
};

/// A process that lives until killed.
fn sleeper() -> Child {
    std::process::Command::new("sleep")
        .arg("10")
        .spawn()
        .unwrap()
}

fn end(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A batch's processes are all read, and told, before any table is built
/// or any mapping published: a large binary's table takes most of a
/// second, and a process read after it may be gone by then (a program in
/// a container, whose files are then unreadable by their paths).
#[test]
fn a_batch_is_read_and_told_before_any_process_is_published() {
    let child = sleeper();
    let pids = [std::process::id(), child.id()];
    let mut maps = maps(8 << 20);
    let mut unwinder = Unwinder::new(8 << 20);
    maps.requests.extend(pids);
    let mut told = Vec::new();
    let served = unwinder
        .serve_requests(
            &mut maps,
            |_, _, _| Ok(Vec::new()),
            |maps: &mut MemoryKernel, fresh: &[Fresh<'_>], _: &[(u32, ProcessSeen)]| {
                assert!(maps.mappings.is_empty() && maps.files.is_empty());
                told.extend(fresh.iter().map(|f| (f.pid, f.mappings.len())));
            },
        )
        .unwrap();
    end(child);
    told.sort_unstable();
    let mut expected = pids;
    expected.sort_unstable();
    assert_eq!(
        told.iter().map(|&(pid, _)| pid).collect::<Vec<_>>(),
        expected
    );
    assert!(told.iter().all(|&(_, mappings)| mappings > 1), "{told:?}");
    assert_eq!(served.published.len(), 2);
    assert!(pids.iter().all(|pid| maps.mappings.contains_key(pid)));
}

/// A request made while a batch publishes is read, and told, before the
/// rest of the batch is built: a batch at the daemon's start builds the
/// tables of every binary running, and a process started and ended within
/// it was read after it, gone. A process of the batch that asks again
/// before its publish is not read twice (its request is put back until
/// it is published).
#[test]
fn a_request_made_while_a_batch_publishes_is_read_within_it() {
    let (second, late) = (sleeper(), sleeper());
    let (first, second_pid, late_pid) = (std::process::id(), second.id(), late.id());
    let mut maps = maps(8 << 20);
    let mut unwinder = Unwinder::new(8 << 20);
    unwinder.intake_every = Duration::ZERO;
    maps.requests.extend([first, second_pid]);
    let events = RefCell::new(Vec::new());
    let served = unwinder
        .serve_requests(
            &mut maps,
            |maps: &mut MemoryKernel, pid, _| {
                events.borrow_mut().push(("published", pid));
                if pid == first {
                    // The kernel asks meanwhile: for a new process, and
                    // again for one of the batch.
                    maps.requests.extend([late_pid, second_pid]);
                }
                Ok(Vec::new())
            },
            |_: &mut MemoryKernel, fresh: &[Fresh<'_>], _: &[(u32, ProcessSeen)]| {
                let mut events = events.borrow_mut();
                events.extend(fresh.iter().map(|f| ("read", f.pid)));
            },
        )
        .unwrap();
    end(second);
    end(late);
    assert_eq!(
        events.into_inner(),
        [
            ("read", first),
            ("read", second_pid),
            ("published", first),
            ("read", late_pid),
            ("published", second_pid),
            ("published", late_pid),
        ]
    );
    assert_eq!(served.published, [first, second_pid, late_pid]);
}

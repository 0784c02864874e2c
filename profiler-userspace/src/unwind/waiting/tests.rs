//! Requests that wait, served against in-memory maps for this test
//! process (which sees our root: the kernel's view is made by hand).
use std::{os::unix::fs::MetadataExt as _, thread::sleep};

use profiler_common::process::ProcessSeen;

use super::WAIT;
use crate::{
    bpf::in_memory::MemoryKernel,
    unwind::{Unwinder, tests::untold},
};

/// What the kernel sees of this process, in its encodings.
fn seen_here(deferrable: bool) -> ProcessSeen {
    let ns = std::fs::metadata("/proc/self/ns/mnt").unwrap();
    let root = std::fs::metadata("/").unwrap();
    let dev = root.dev();
    // `makedev` undone: major and minor, as the kernel packs them.
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    ProcessSeen {
        mnt_ns: u32::try_from(ns.ino()).unwrap(),
        root_ino: root.ino(),
        root_dev: (major << 20) | minor,
        deferrable: u32::from(deferrable),
        ..ProcessSeen::default()
    }
}

fn waiting_unwinder() -> Unwinder {
    let mut unwinder = Unwinder::without_tables();
    unwinder.let_requests_wait();
    unwinder
}

#[test]
fn a_process_walked_by_its_files_tables_is_read_once_it_has_lived_on() {
    let pid = std::process::id();
    let mut maps = MemoryKernel::default();
    let mut unwinder = waiting_unwinder();
    maps.seen_requests.push((pid, seen_here(true)));
    let served = unwinder
        .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert!(served.published.is_empty(), "{served:?}");
    assert_eq!(
        served.waiting,
        [(pid, seen_here(true))],
        "named and placed now"
    );
    assert_eq!(
        maps.seen_requests,
        [(pid, seen_here(true))],
        "put back as made"
    );
    assert!(maps.mappings.is_empty());
    // Served again within the wait: still put back, not told again.
    let served = unwinder
        .serve_requests(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert!(served.published.is_empty() && served.waiting.is_empty());
    assert_eq!(maps.seen_requests.len(), 1);
    assert_eq!(unwinder.requests_waiting(), 1);
    sleep(WAIT);
    let served = unwinder
        .serve_requests(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert_eq!(served.published, [pid], "due: read and published");
    assert!(maps.mappings.contains_key(&pid));
    assert!(maps.seen_requests.is_empty());
    let stats = unwinder.stats();
    assert_eq!((stats.requests_waited, stats.waited_then_read), (1, 1));
    assert_eq!(unwinder.requests_waiting(), 0);
}

#[test]
fn a_walk_that_met_a_file_without_a_table_is_served_at_once() {
    let pid = std::process::id();
    let mut maps = MemoryKernel::default();
    let mut unwinder = waiting_unwinder();
    maps.seen_requests.push((pid, seen_here(false)));
    let served = unwinder
        .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert_eq!(served.published, [pid]);
    assert!(served.waiting.is_empty());
}

#[test]
fn requests_wait_only_where_the_records_name_the_files() {
    let pid = std::process::id();
    // Targets whose images are not recorded (`--pid`).
    let mut maps = MemoryKernel::default();
    let mut unwinder = Unwinder::without_tables();
    maps.seen_requests.push((pid, seen_here(true)));
    let served = unwinder
        .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert_eq!(served.published, [pid]);
    // Another root (a container's): its records name files by its paths.
    let mut maps = MemoryKernel::default();
    let mut unwinder = waiting_unwinder();
    let elsewhere = ProcessSeen {
        root_ino: seen_here(true).root_ino + 1,
        ..seen_here(true)
    };
    maps.seen_requests.push((pid, elsewhere));
    let served = unwinder
        .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert_eq!(served.published, [pid]);
    // The kernel could not tell (no offsets): served at once.
    let mut maps = MemoryKernel::default();
    let mut unwinder = waiting_unwinder();
    maps.seen_requests.push((
        pid,
        ProcessSeen {
            deferrable: 1,
            ..ProcessSeen::default()
        },
    ));
    let served = unwinder
        .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert_eq!(served.published, [pid]);
}

#[test]
fn a_published_process_that_maps_more_is_served_at_once() {
    let pid = std::process::id();
    let mut maps = MemoryKernel::default();
    let mut unwinder = waiting_unwinder();
    maps.requests.push(pid);
    unwinder
        .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert!(maps.mappings.contains_key(&pid));
    // A library loaded since, with its table: the process lives, served.
    maps.seen_requests.push((pid, seen_here(true)));
    let served = unwinder
        .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert!(served.waiting.is_empty(), "{served:?}");
    assert_eq!(unwinder.stats().requests_waited, 0);
}

#[test]
fn nothing_is_read_of_a_process_that_exited_but_its_name_and_placement_are_kept() {
    let pid = std::process::id();
    let exited = |deferrable| ProcessSeen {
        exited: 1,
        ..seen_here(deferrable)
    };
    // Exited before any serve took its request: kept from the request.
    let mut maps = MemoryKernel::default();
    let mut unwinder = waiting_unwinder();
    maps.seen_requests.push((pid, exited(true)));
    let served = unwinder
        .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert!(served.published.is_empty(), "nothing read: {served:?}");
    assert_eq!(served.waiting, [(pid, exited(true))]);
    assert!(maps.seen_requests.is_empty(), "not put back");
    // Exited while it waited: kept when first taken, not again.
    maps.seen_requests.push((pid, seen_here(true)));
    assert_eq!(
        unwinder
            .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
            .unwrap()
            .waiting
            .len(),
        1
    );
    maps.seen_requests = vec![(pid, exited(true))];
    let served = unwinder
        .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert!(served.published.is_empty() && served.waiting.is_empty());
    assert!(maps.seen_requests.is_empty());
    assert_eq!(unwinder.requests_waiting(), 0);
    // A request that may not wait, of a process that exited: nothing read
    // either.
    maps.seen_requests.push((pid, exited(false)));
    let served = unwinder
        .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert!(served.published.is_empty());
    assert_eq!(unwinder.stats().exited_unread, 3);
}

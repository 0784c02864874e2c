//! The unwinder's bookkeeping against in-memory maps, on this test
//! process's own mappings: what it publishes, what it shares and skips,
//! and what it counts when the budget is too small.
use profiler_common::unwind::{
    ROW_SEARCH_STEPS, UnwindRow, bucket_count, bucket_of, bucket_rows, by_file::FileKey, search,
};

use profiler_common::process::ProcessSeen;

use super::{Fresh, Unwinder};
use crate::{bpf::in_memory::MemoryKernel, process::stamps::Stamps};

/// What serving is told once a batch is read, ignored.
pub(super) fn untold<M>(_: &mut M, _: &[Fresh<'_>], _: &[(u32, ProcessSeen)]) {}

/// The kernel maps, in memory, with an array of `rows`.
pub(super) fn maps(rows: u32) -> MemoryKernel {
    let mut maps = MemoryKernel::default();
    maps.rows = vec![UnwindRow::default(); rows as usize];
    maps
}

#[inline(never)]
fn a_function_of_this_binary() -> usize {
    std::hint::black_box(a_function_of_this_binary as *const () as usize)
}

/// The published mapping holding `pc`.
fn mapping_of(maps: &MemoryKernel, pid: u32, pc: u64) -> profiler_common::unwind::UnwindMapping {
    let published = maps.mappings[&pid];
    *published.mappings[..published.len as usize]
        .iter()
        .find(|m| m.start <= pc && pc < m.end)
        .expect("a published mapping holds the pc")
}

#[test]
fn publishes_own_mappings_with_tables_and_skips_unchanged_ones() {
    let pid = std::process::id();
    let mut maps = maps(8 << 20);
    let mut unwinder = Unwinder::new(8 << 20);
    maps.requests.push(pid);
    unwinder
        .serve_requests(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();

    // This binary's code: a table whose rows cover the function's PC
    // (relative to the table's bias).
    let pc = a_function_of_this_binary() as u64;
    let m = mapping_of(&maps, pid, pc);
    assert!(m.rows() > 0, "this binary has a table: {m:?}");
    let rows = &maps.rows[m.first_row as usize..(m.first_row + m.rows()) as usize];
    let rel = pc - m.bias;
    assert!(
        u64::from(rows[0].pc) <= rel && rel <= u64::from(rows[rows.len() - 1].pc),
        "pc {rel:#x} outside its rows {:#x}..{:#x}",
        rows[0].pc,
        rows[rows.len() - 1].pc
    );
    // The bucket index after the rows leads to the row that a search of
    // all of them finds, as the kernel's walk reads it.
    let index = |b: u32| {
        let at = m.first_row + m.rows() + b;
        maps.rows.get(at as usize).map(|entry| entry.pc)
    };
    let bucket = bucket_of(u32::try_from(rel).unwrap(), m.bucket_shift(), m.rows());
    let range = bucket_rows(m.rows(), bucket, index).unwrap();
    let pc_at = |i: u32| Some(u64::from(rows[i as usize].pc));
    assert!(range.1 < m.rows(), "not the whole table: {range:?}");
    assert_eq!(
        search(range, rel, ROW_SEARCH_STEPS, pc_at),
        search((0, m.rows()), rel, ROW_SEARCH_STEPS, pc_at)
    );
    let stats = unwinder.stats();
    assert!(stats.tables_built >= 2, "this binary and libc: {stats:?}");
    assert_eq!(stats.mapping_publishes, 1);
    assert_eq!(stats.publishes_over_mapping_limit, 0);
    let run = m.rows() + bucket_count(m.rows());
    assert!(stats.rows_in_use >= u64::from(run));

    // Asked again with the same mappings: nothing rebuilt or republished.
    maps.requests.push(pid);
    unwinder
        .serve_requests(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert_eq!(unwinder.stats(), stats);
}

#[test]
fn a_table_over_budget_is_counted_and_its_mapping_has_no_rows() {
    let pid = std::process::id();
    // 64 KiB of rows: less than this (debug) test binary's table.
    let mut maps = maps(8192);
    let mut unwinder = Unwinder::new(8192);
    unwinder
        .publish(&mut maps, pid, &mut |_, _, _| Ok(Vec::new()))
        .unwrap();
    let m = mapping_of(&maps, pid, a_function_of_this_binary() as u64);
    assert_eq!(m.rows(), 0, "walked by frame pointer: {m:?}");
    assert!(unwinder.stats().tables_over_budget >= 1);
    assert!(unwinder.stats().rows_in_use <= 8192);
}

#[test]
fn a_process_that_is_gone_is_skipped() {
    let mut maps = maps(1024);
    let mut unwinder = Unwinder::new(1024);
    // Above pid_max (at most 2^22): no such process.
    maps.requests.push(1 << 23);
    unwinder
        .serve_requests(&mut maps, |_, _, _| Ok(Vec::new()), untold)
        .unwrap();
    assert!(maps.mappings.is_empty());
    assert_eq!(unwinder.stats().mapping_publishes, 0);
}

#[test]
fn a_rung_request_for_a_process_gone_is_dropped_not_put_back() {
    let mut maps = maps(1024);
    let mut unwinder = Unwinder::new(1024);
    // Above pid_max (at most 2^22): no such process.
    maps.requests.push(1 << 23);
    assert!(
        unwinder
            .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
            .unwrap()
            .published
            .is_empty()
    );
    assert!(maps.requests.is_empty(), "{:?}", maps.requests);
}

#[test]
fn an_exited_process_is_forgotten_and_a_live_one_kept() {
    let mut maps = maps(8 << 20);
    let mut unwinder = Unwinder::new(8 << 20);
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let (live, exited) = (std::process::id(), child.id());
    maps.requests.extend([live, exited]);
    assert_eq!(
        unwinder
            .serve_requests(&mut maps, |_, _, _| Ok(Vec::new()), untold)
            .unwrap()
            .published
            .len(),
        2
    );
    child.kill().unwrap();
    child.wait().unwrap();
    unwinder.forget_exited(&mut maps).unwrap();
    assert!(maps.mappings.contains_key(&live));
    assert!(!maps.mappings.contains_key(&exited));
    assert!(unwinder.identified_mappings(exited).is_none());
}

#[test]
fn a_rung_request_that_changes_nothing_waits_for_the_poll() {
    let pid = std::process::id();
    let mut maps = maps(8 << 20);
    let mut unwinder = Unwinder::new(8 << 20);
    maps.requests.push(pid);
    assert_eq!(
        unwinder
            .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
            .unwrap()
            .published,
        [pid]
    );
    assert!(maps.requests.is_empty(), "published: the request is done");
    // Asked again with the same mappings (a PC no mapping explains): put
    // back, so that the walker does not ring for it until the poll.
    maps.requests.push(pid);
    assert!(
        unwinder
            .serve_rung(&mut maps, |_, _, _| Ok(Vec::new()), untold)
            .unwrap()
            .published
            .is_empty()
    );
    assert_eq!(maps.requests, [pid]);
    assert!(
        unwinder
            .serve_requests(&mut maps, |_, _, _| Ok(Vec::new()), untold)
            .unwrap()
            .published
            .is_empty()
    );
    assert!(maps.requests.is_empty(), "the poll takes it");
}

/// This test binary's code mapping.
fn own_code() -> crate::process::maps::Vma {
    let pc = a_function_of_this_binary() as u64;
    crate::process::maps::read(std::process::id())
        .unwrap()
        .into_iter()
        .find(|v| v.start <= pc && pc < v.end)
        .expect("this binary's code is mapped")
}

/// A mapping gone before its file is opened (the process exec'd while its
/// maps were read) leaves no binary behind: the next mapping of the file
/// builds its table. Kept as a binary without rows, libc stayed without
/// a table for the daemon's life.
#[test]
fn a_binary_unreadable_through_a_gone_mapping_is_built_at_its_next_mapping() {
    let pid = std::process::id();
    let vma = &own_code();
    let id = super::binary::binary_id(pid, vma, &mut Stamps::default(), None)
        .expect("this binary has an identity");
    // The same file as seen through a range this process does not map.
    let gone = crate::process::maps::Vma {
        start: 0x1000,
        end: 0x2000,
        ..vma.clone()
    };
    let mut maps = maps(8 << 20);
    let mut unwinder = Unwinder::new(8 << 20);
    assert_eq!(
        unwinder.table_for(&mut maps, pid, &gone, &id).unwrap(),
        None
    );
    assert_eq!(unwinder.stats().binaries_unreadable, 1);
    assert_eq!(unwinder.stats().tables_built, 0);

    let (_, table, _) = unwinder
        .table_for(&mut maps, pid, vma, &id)
        .unwrap()
        .expect("built through the live mapping");
    assert!(table != 0);
    assert_eq!(unwinder.stats().tables_built, 1);
}

/// A copy of a file (another stamp: here, the same file as if seen
/// through a new overlay mount) with the same build id is the same
/// binary: its table is built once.
#[test]
fn copies_of_a_binary_with_one_build_id_share_one_table() {
    let pid = std::process::id();
    let vma = &own_code();
    let mut build_ids = crate::process::build_ids::BuildIds::default();
    let id =
        super::binary::binary_id(pid, vma, &mut Stamps::default(), Some(&mut build_ids)).unwrap();
    let super::binary::BinaryId::File {
        stamp, build_id, ..
    } = id.clone()
    else {
        panic!("a file: {id:?}");
    };
    assert!(build_id.is_some(), "Rust binaries carry a build id");
    let copy = super::binary::BinaryId::File {
        stamp: crate::process::maps::FileStamp {
            dev: stamp.dev + 1,
            ..stamp
        },
        digest: None,
        build_id: build_id.clone(),
    };
    let without = super::binary::BinaryId::File {
        stamp: copy.stamp().unwrap(),
        digest: None,
        build_id: None,
    };
    assert_eq!(id, copy);
    assert_ne!(id, without, "known by its stamp alone, it is another file");
    // Without a build id, one digest is one binary through every mount
    // (another stamp device), another digest another binary.
    let digest = crate::process::files::read_digest(pid, vma).expect("our own code is read");
    let mounted = |dev, digest| super::binary::BinaryId::File {
        stamp: crate::process::maps::FileStamp { dev, ..stamp },
        digest: Some(digest),
        build_id: None,
    };
    assert_eq!(mounted(1, digest), mounted(2, digest));
    assert_ne!(mounted(1, digest), mounted(1, digest ^ 1));

    let mut maps = maps(8 << 20);
    let mut unwinder = Unwinder::new(8 << 20);
    let first = unwinder.table_for(&mut maps, pid, vma, &id).unwrap();
    assert!(first.is_some());
    assert_eq!(
        unwinder.table_for(&mut maps, pid, vma, &copy).unwrap(),
        first
    );
    assert_eq!(unwinder.stats().tables_built, 1);
}

/// A binary's table placed is published for the file each mapping of it
/// maps, placed as that mapping is (what the kernel walks a process by
/// before its own mappings are published), and the file goes when the
/// binary's rows are given back.
#[test]
fn a_binarys_files_are_published_with_its_table_and_go_with_its_rows() {
    let pid = std::process::id();
    let mut maps = maps(8 << 20);
    let mut unwinder = Unwinder::new(8 << 20);
    unwinder
        .publish(&mut maps, pid, &mut |_, _, _| Ok(Vec::new()))
        .unwrap();
    let vma = own_code();
    let stamp = crate::process::maps::FileStamp::of_mapping(pid, &vma).unwrap();
    let key = FileKey {
        ino: vma.file.expect("a file").inode,
        size: stamp.size,
        mtime: stamp.mtime,
        offset: vma.offset,
    };
    let table = maps
        .files
        .get(&key)
        .expect("this binary's file is published");
    assert_eq!(
        table.mapping(vma.start, vma.end),
        mapping_of(&maps, pid, vma.start)
    );
    // Published again (asked anew): the file is not published twice.
    let files = maps.files.len();
    unwinder.forget(&mut maps, pid).unwrap();
    unwinder
        .publish(&mut maps, pid, &mut |_, _, _| Ok(Vec::new()))
        .unwrap();
    assert_eq!(maps.files.len(), files);

    unwinder.forget(&mut maps, pid).unwrap();
    while unwinder.evict_one_unused(&mut maps).unwrap() {}
    assert!(maps.files.is_empty(), "{:?}", maps.files);
}

/// The key of this binary's code mapping in the kernel's map of files.
fn own_file_key(pid: u32) -> FileKey {
    let vma = own_code();
    let stamp = crate::process::maps::FileStamp::of_mapping(pid, &vma).unwrap();
    FileKey {
        ino: vma.file.expect("a file").inode,
        size: stamp.size,
        mtime: stamp.mtime,
        offset: vma.offset,
    }
}

/// A file's new processes may wait to be read (`waiting.rs`) once every
/// runtime read it and found none of its own; not while one has not.
#[test]
fn a_files_new_processes_may_wait_once_no_runtime_claims_it() {
    let pid = std::process::id();
    let mut maps = maps(8 << 20);
    let mut unwinder = Unwinder::new(8 << 20);
    // A runtime's, or not read by every runtime: read at once.
    unwinder
        .publish(&mut maps, pid, &mut |_, _, m| Ok(vec![false; m.len()]))
        .unwrap();
    assert_eq!(maps.files[&own_file_key(pid)].may_wait, 0);
    // None of any runtime's: the file published already is written
    // again, marked.
    unwinder.forget(&mut maps, pid).unwrap();
    unwinder
        .publish(&mut maps, pid, &mut |_, _, m| Ok(vec![true; m.len()]))
        .unwrap();
    assert_eq!(maps.files[&own_file_key(pid)].may_wait, 1);
    // And stays so.
    unwinder.forget(&mut maps, pid).unwrap();
    unwinder
        .publish(&mut maps, pid, &mut |_, _, m| Ok(vec![false; m.len()]))
        .unwrap();
    assert_eq!(maps.files[&own_file_key(pid)].may_wait, 1);
}

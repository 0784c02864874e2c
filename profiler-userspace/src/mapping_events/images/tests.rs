use super::*;
use crate::process::maps::FileId;

fn file(path: &str) -> MappedFile {
    MappedFile {
        path: path.into(),
        build_id: Some(format!("{:040x}", path.len()).into()),
        id: None,
    }
}

fn mmap(pid: u32, start: u64, end: u64, path: &str) -> Event {
    Event::Mmap {
        pid,
        mapping: NewMapping {
            start,
            end,
            offset: 0x1000,
            file: file(path),
        },
    }
}

fn exec(pid: u32, comm: &str) -> Event {
    Event::Exec {
        pid,
        comm: Arc::from(comm),
    }
}

/// No process is running before the records (nothing to read in /proc).
fn nothing_running(_: u32) -> Option<Running> {
    None
}

fn ranges(image: &RecordedImage) -> Vec<(u64, u64, u64, &str)> {
    image
        .vmas
        .iter()
        .map(|v| (v.start, v.end, v.offset, &*v.file.path))
        .collect()
}

#[test]
fn an_exec_and_its_mmaps_end_with_the_exit() {
    let mut images = Images::default();
    for event in [
        exec(7, "brief"),
        mmap(7, 0x5000, 0x6000, "/bin/brief"),
        mmap(7, 0x1000, 0x2000, "/lib/ld.so"),
        mmap(7, 0x3000, 0x4000, "/lib/libc.so"),
    ] {
        images.apply(event, &mut nothing_running);
    }
    assert!(images.take_ended().0.is_empty(), "still running");
    images.apply(Event::Exit { pid: 7 }, &mut nothing_running);
    let ended = images.take_ended().0;
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].pid, 7);
    assert_eq!(ended[0].comm.as_deref(), Some("brief"));
    assert_eq!(
        ranges(&ended[0]),
        [
            (0x1000, 0x2000, 0x1000, "/lib/ld.so"),
            (0x3000, 0x4000, 0x1000, "/lib/libc.so"),
            (0x5000, 0x6000, 0x1000, "/bin/brief"),
        ],
        "in address order"
    );
    assert_eq!(images.followed(), 0);
}

#[test]
fn an_exec_ends_the_image_before_it() {
    let mut images = Images::default();
    images.apply(exec(7, "sh"), &mut nothing_running);
    images.apply(mmap(7, 0x1000, 0x2000, "/bin/sh"), &mut nothing_running);
    images.apply(exec(7, "brief"), &mut nothing_running);
    images.apply(mmap(7, 0x8000, 0x9000, "/bin/brief"), &mut nothing_running);
    let before = images.take_ended().0;
    assert_eq!(before.len(), 1);
    assert_eq!(ranges(&before[0]), [(0x1000, 0x2000, 0x1000, "/bin/sh")]);
    images.apply(Event::Exit { pid: 7 }, &mut nothing_running);
    let after = images.take_ended().0;
    assert_eq!(after[0].comm.as_deref(), Some("brief"));
    assert_eq!(ranges(&after[0]), [(0x8000, 0x9000, 0x1000, "/bin/brief")]);
}

#[test]
fn a_fork_shares_its_parents_image_until_it_maps_more() {
    let mut images = Images::default();
    images.apply(exec(7, "server"), &mut nothing_running);
    images.apply(mmap(7, 0x1000, 0x2000, "/bin/server"), &mut nothing_running);
    images.apply(Event::Fork { pid: 8, parent: 7 }, &mut nothing_running);
    images.apply(Event::Fork { pid: 9, parent: 7 }, &mut nothing_running);
    images.apply(
        mmap(9, 0x4000, 0x5000, "/lib/plugin.so"),
        &mut nothing_running,
    );
    images.apply(Event::Exit { pid: 8 }, &mut nothing_running);
    images.apply(Event::Exit { pid: 9 }, &mut nothing_running);
    let ended = images.take_ended().0;
    assert_eq!(ended.len(), 2);
    assert_eq!(
        ended[0].comm.as_deref(),
        Some("server"),
        "the parent's name"
    );
    assert_eq!(ranges(&ended[0]), [(0x1000, 0x2000, 0x1000, "/bin/server")]);
    assert_eq!(ranges(&ended[1]).len(), 2);
    assert!(
        Arc::ptr_eq(&ended[0].vmas[0].file, &ended[1].vmas[0].file),
        "one file, shared"
    );
    assert_eq!(images.followed(), 1, "the parent runs on");
}

#[test]
fn a_process_running_before_the_records_is_read_from_proc_once() {
    let mut reads = Vec::new();
    let mut proc = |pid: u32| {
        reads.push(pid);
        Some(Running {
            comm: Some(Arc::from("watch.sh")),
            vmas: vec![Vma {
                start: 0x1000,
                end: 0x2000,
                offset: 0,
                path: "/bin/bash".into(),
                file: FileId::new(0xfd, 1, 42),
            }],
        })
    };
    let mut images = Images::default();
    images.apply(Event::Fork { pid: 8, parent: 7 }, &mut proc);
    images.apply(Event::Fork { pid: 9, parent: 7 }, &mut proc);
    images.apply(Event::Exit { pid: 8 }, &mut proc);
    assert_eq!(reads, [7], "the parent, once");
    let ended = images.take_ended().0;
    let file = &ended[0].vmas[0].file;
    assert_eq!(&*file.path, "/bin/bash");
    assert_eq!(file.build_id, None);
    assert_eq!(file.id, FileId::new(0xfd, 1, 42), "checked by inode later");
    assert_eq!(
        ended[0].comm.as_deref(),
        Some("watch.sh"),
        "a child that never execs is named as its parent"
    );
}

#[test]
fn a_gone_process_never_seen_is_not_followed() {
    let mut images = Images::default();
    images.apply(mmap(7, 0x1000, 0x2000, "/bin/x"), &mut nothing_running);
    images.apply(Event::Exit { pid: 7 }, &mut nothing_running);
    assert!(images.take_ended().0.is_empty());
    assert_eq!(images.followed(), 0);
}

#[test]
fn a_new_mapping_replaces_what_it_overlaps() {
    let mut images = Images::default();
    images.apply(exec(7, "x"), &mut nothing_running);
    images.apply(mmap(7, 0x1000, 0x5000, "/lib/old.so"), &mut nothing_running);
    images.apply(mmap(7, 0x2000, 0x3000, "/lib/new.so"), &mut nothing_running);
    images.apply(mmap(7, 0x8000, 0x9000, "/bin/x"), &mut nothing_running);
    images.apply(mmap(7, 0x8000, 0x9000, "/bin/x"), &mut nothing_running);
    images.apply(Event::Exit { pid: 7 }, &mut nothing_running);
    let ended = images.take_ended().0;
    assert_eq!(
        ranges(&ended[0]),
        [
            (0x1000, 0x2000, 0x1000, "/lib/old.so"),
            (0x2000, 0x3000, 0x1000, "/lib/new.so"),
            (0x3000, 0x5000, 0x3000, "/lib/old.so"),
            (0x8000, 0x9000, 0x1000, "/bin/x"),
        ],
        "the old mapping's tail keeps its file offset; a repeat replaces itself"
    );
}

#[test]
fn ended_images_are_bounded_and_files_released() {
    let mut images = Images::default();
    let count = u32::try_from(MAX_ENDED).unwrap() + 10;
    for pid in 1..=count {
        images.apply(exec(pid, "brief"), &mut nothing_running);
        images.apply(
            mmap(pid, 0x1000, 0x2000, "/bin/brief"),
            &mut nothing_running,
        );
        images.apply(Event::Exit { pid }, &mut nothing_running);
    }
    let (ended, stats) = images.take_ended();
    assert_eq!(stats.dropped, 10);
    assert_eq!(stats.ended, u64::from(count));
    assert_eq!(ended.len(), MAX_ENDED);
    assert_eq!(ended[0].pid, 11, "the oldest went");
    assert_eq!(images.files.len(), 1, "still used by the images taken");
    drop(ended);
    let (_, stats) = images.take_ended();
    assert!(images.files.is_empty());
    assert_eq!(stats, RecordStats::default(), "counts since the last take");
}

#[test]
fn a_full_table_forgets_processes_whose_exit_was_lost() {
    let mut images = Images::default();
    let parent = std::process::id();
    images.apply(exec(parent, "shell"), &mut nothing_running);
    images.apply(
        mmap(parent, 0x1000, 0x2000, "/bin/sh"),
        &mut nothing_running,
    );
    // Children that never exist in /proc here: as if their exits were lost.
    let first = 1 << 30;
    let count = u32::try_from(MAX_PROCESSES).unwrap() - 1;
    for pid in first..first + count {
        images.apply(Event::Fork { pid, parent }, &mut nothing_running);
    }
    assert_eq!(images.followed(), MAX_PROCESSES, "full");
    images.apply(Event::Fork { pid: 7, parent }, &mut nothing_running);
    assert_eq!(
        images.followed(),
        2,
        "the lost ones were swept: the parent and 7"
    );
    assert_eq!(images.take_ended().1.untracked, 0);
}

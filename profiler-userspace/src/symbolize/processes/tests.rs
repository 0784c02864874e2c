//! Which image of a process a stack belongs to, and the build ids images
//! share.
use super::*;
use crate::{process::maps::Vma, profile::Mapping};

fn generation(ranges: &[(u64, u64)]) -> Generation {
    let mut generation = Generation::empty();
    generation.vmas = ranges
        .iter()
        .map(|&(start, end)| {
            let vma = Vma {
                start,
                end,
                offset: 0,
                path: format!("/bin/{start:x}").into(),
                file: None,
            };
            let mapping = Arc::new(Mapping {
                start,
                limit: end,
                file_offset: 0,
                file: vma.path.clone(),
                build_id: Arc::default(),
                digest: None,
                file_id: None,
            });
            (vma, mapping)
        })
        .collect();
    generation
}

#[test]
fn a_stack_goes_to_the_image_that_maps_it() {
    let mut processes = Processes::default();
    processes.refresh(u32::MAX, "gone", 1);
    let process = processes.get_mut(u32::MAX).unwrap();
    process.generations.clear();
    process.add_generation(generation(&[(0x1000, 0x2000), (0x9000, 0xa000)]));
    process.add_generation(generation(&[(0x5000, 0x6000), (0x9000, 0xa000)]));
    process.add_generation(generation(&[(0x5000, 0x6000), (0x9000, 0xa000)]));
    assert_eq!(
        process.generations.len(),
        2,
        "an unchanged read adds nothing"
    );
    // Leaf first; callers are looked up one byte back.
    assert_eq!(process.generation_of(&[0x1500, 0x9101]), 0);
    assert_eq!(process.generation_of(&[0x5500, 0x9101]), 1);
    assert_eq!(process.generation_of(&[0x9500]), 1, "both map it: newest");
    assert_eq!(
        process.generation_of(&[0x1500, 0x7001, 0x7001]),
        0,
        "most mapped"
    );
    assert_eq!(process.generation_of(&[0x7000]), 1, "none maps it: newest");
    assert!(!process.is_current(1), "never read at a window's end");
    processes.start_window();
    assert_eq!(processes.get(u32::MAX).unwrap().generations.len(), 1);
}

/// `generation` with build id `id` for every mapping.
fn with_build_ids(mut generation: Generation, id: &str) -> Generation {
    for (_, mapping) in &mut generation.vmas {
        Arc::make_mut(mapping).build_id = id.into();
    }
    generation
}

#[test]
fn images_share_build_ids_of_the_same_file_at_the_same_place() {
    let mut processes = Processes::default();
    processes.refresh(u32::MAX, "gone", 1);
    let process = processes.get_mut(u32::MAX).unwrap();
    process.generations.clear();
    // Read at exec with build ids; then, as it exits, with the library it
    // loaded since but no build ids at all.
    process.add_generation(with_build_ids(generation(&[(0x1000, 0x2000)]), "ab"));
    process.add_generation(generation(&[(0x1000, 0x2000), (0x9000, 0xa000)]));
    let newest = &process.generations[1].vmas;
    assert_eq!(
        &*newest[0].1.build_id, "ab",
        "the same file at the same place"
    );
    assert_eq!(&*newest[1].1.build_id, "", "a file no other image maps");
    // A record without build ids, then a read with them and the same
    // mappings: the record gets them.
    process.add_generation(with_build_ids(
        generation(&[(0x1000, 0x2000), (0x9000, 0xa000)]),
        "cd",
    ));
    assert_eq!(process.generations.len(), 2, "the same mappings");
    assert_eq!(&*process.generations[1].vmas[1].1.build_id, "cd");
    assert_eq!(&*process.generations[1].vmas[0].1.build_id, "ab");
}

/// A process found gone at a window's end is dropped (with any container
/// root it holds) at the next end it has no samples at; one that lives,
/// after `after`.
#[test]
fn a_process_found_gone_is_dropped_the_window_after() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    let live = std::process::id();
    let mut processes = Processes::default();
    processes.know(gone, "true", 1);
    processes.know(live, "tests", 1);
    assert!(processes.evict(1, 10).is_empty(), "found gone at this end");
    assert_eq!(processes.evict(2, 10), vec![gone]);
    assert!(processes.evict(10, 10).is_empty());
    assert_eq!(processes.evict(11, 10), vec![live]);
}

/// A process that was alive at the end of the window of its last samples
/// and exited after is kept one window more (its last samples may come
/// with the next), then dropped; with samples in the window after it was
/// found gone (drained late), at the next end.
#[test]
fn a_process_that_exits_later_is_dropped_two_windows_after_its_last_samples() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut processes = Processes::default();
    processes.know(pid, "sleep", 1);
    assert!(processes.evict(1, 10).is_empty());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(processes.evict(2, 10).is_empty(), "seen a window ago");
    assert_eq!(processes.evict(3, 10), vec![pid]);

    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    processes.know(gone, "true", 4);
    assert!(processes.evict(4, 10).is_empty());
    processes.know(gone, "true", 5);
    assert!(processes.evict(5, 10).is_empty(), "samples this window");
    assert_eq!(processes.evict(6, 10), vec![gone]);
}

/// A process read at one window's end and gone by the next keeps what was
/// read (its name, placement and image), and one never read is named by
/// its sample's thread: nothing is read of a process that is gone.
#[test]
fn a_process_gone_by_the_windows_end_keeps_what_was_read() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id();
    // Read once it runs `sleep` (before its exec it is a copy of this test).
    let exec = std::time::Instant::now();
    while procfs::comm(pid, pid).as_deref() != Some("sleep") {
        assert!(exec.elapsed().as_secs() < 10, "sleep never started");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let mut processes = Processes::default();
    assert!(matches!(
        processes.refresh(pid, "thread", 1),
        Some(Mappings::Read)
    ));
    let read = processes.get(pid).unwrap();
    assert_eq!(&*read.comm, "sleep");
    let placement = read.placement.clone();
    assert!(!placement.cgroup.is_empty(), "{placement:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!procfs::exists(pid));
    assert!(matches!(
        processes.refresh(pid, "thread", 2),
        Some(Mappings::Remembered)
    ));
    let gone = processes.get(pid).unwrap();
    assert_eq!(&*gone.comm, "sleep");
    assert_eq!(gone.placement, placement);
    assert!(!gone.generations.last().unwrap().vmas.is_empty());

    let mut never = std::process::Command::new("true").spawn().unwrap();
    let never_pid = never.id();
    never.wait().unwrap();
    assert!(matches!(
        processes.refresh(never_pid, "thread", 2),
        Some(Mappings::Unreadable)
    ));
    processes.know(never_pid, "other", 2);
    assert_eq!(&*processes.get(never_pid).unwrap().comm, "thread");
}

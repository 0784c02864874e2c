use super::{
    convert::{BinaryKey, lookup_addrs},
    prepare::EVICT_AFTER_WINDOWS,
    *,
};
use crate::{sample::RawSample, window::RawWindow};
use std::{collections::HashSet, path::PathBuf};

#[test]
fn return_addresses_are_looked_up_one_byte_back() {
    let frames = [0x1000, 0x2000, 0x3000];
    assert_eq!(
        lookup_addrs(&frames).collect::<Vec<_>>(),
        vec![0x1000, 0x1fff, 0x2fff]
    );
}

/// A file without a build id is one binary wherever its digest is known
/// (an image's Go program through each container's mount: another device
/// each time), else one per path and file: never one per path alone.
#[test]
fn a_file_without_a_build_id_is_known_by_its_digest_else_its_path_and_file() {
    use crate::process::maps::FileId;
    let mapping = |file: &str, dev, digest| Mapping {
        start: 0x1000,
        limit: 0x2000,
        file_offset: 0,
        file: file.into(),
        build_id: Arc::default(),
        digest,
        file_id: FileId::new(0, dev, 7),
    };
    let key = |m: &Mapping| binary_key(m);
    assert_eq!(
        key(&mapping("/app", 40, Some(1))),
        key(&mapping("/srv/app", 42, Some(1)))
    );
    assert_ne!(
        key(&mapping("/app", 40, Some(1))),
        key(&mapping("/app", 40, Some(2)))
    );
    assert_ne!(
        key(&mapping("/app", 40, None)),
        key(&mapping("/app", 42, None))
    );
    assert_eq!(
        key(&mapping("/app", 40, None)),
        key(&mapping("/app", 40, None))
    );
    let with_build_id = Mapping {
        build_id: "ab".into(),
        ..mapping("/app", 40, Some(1))
    };
    assert_eq!(key(&with_build_id), BinaryKey::BuildId("ab".into()));
}

/// A window of one on-CPU sample of `pid` at user address `addr`.
fn one_sample(pid: u32, addr: u64, kernel_stack: Stack) -> RawWindow {
    RawWindow::of_samples(vec![RawSample {
        pid,
        tid: pid,
        thread: "t".into(),
        state: profiler_common::sample::ThreadState::Running,
        user_stack: Stack::Frames(Arc::from([addr])),
        kernel_stack,
        samples: 1,
        off_cpu_ns: 0,
        off_cpu_count: 0,
        labels: None,
        runtime_ns: 0,
        label_set: None,
        thread_attrs: None,
        woken_by: None,
    }])
}

/// The address of an instruction inside this function's body, which is
/// inlined into its caller even in a debug build.
#[inline(always)]
#[expect(clippy::inline_always, reason = "the test needs an inlined frame")]
fn inlined_here() -> u64 {
    let pc: u64;
    // SAFETY: only reads the instruction pointer into a register.
    unsafe { std::arch::asm!("lea {0}, [rip]", out(reg) pc) };
    pc
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "reads this test binary's own DWARF, which the release profile does not emit"
)]
fn symbolizes_own_function_with_inlined_lines() {
    let mut symbolizer = Symbolizer::default();
    let pid = std::process::id();
    let addr = inlined_here();
    let window = one_sample(pid, addr, Stack::Lost { errno: libc::E2BIG });
    let stats = symbolizer.prepare(
        window.samples().iter(),
        window.processes(),
        window.recorded(),
        &[],
    );
    assert_eq!(stats.failed, 0, "{stats:?}");
    let locations = symbolizer.user_locations(pid, &window.samples()[0].user_stack);
    assert_eq!(locations.len(), 1);
    let location = &locations[0];
    assert_eq!(location.address, addr);
    let mapping = location.mapping.as_ref().expect("mapping");
    assert!(!mapping.build_id.is_empty(), "build id of the test binary");
    // Innermost first: the inlined function, then the one it was
    // inlined into, both with this file's lines.
    let [inner, outer] = &location.lines[..] else {
        panic!(
            "expected an inlined and an outer frame: {:?}",
            location.lines
        );
    };
    assert!(inner.function.ends_with("inlined_here"), "{inner:?}");
    assert!(
        outer
            .function
            .ends_with("symbolizes_own_function_with_inlined_lines"),
        "{outer:?}"
    );
    for line in [inner, outer] {
        assert!(line.file.ends_with("symbolize/tests.rs"), "{line:?}");
        assert!(line.line > 0, "{line:?}");
    }
    assert!(
        inner.line < outer.line,
        "the inlined body is above its caller"
    );
    // Windows without the process: its cache entries (ours and
    // blazesym's) go after EVICT_AFTER_WINDOWS.
    for _ in 0..EVICT_AFTER_WINDOWS {
        symbolizer.prepare([].iter(), &[], &[], &[]);
    }
    assert!(!symbolizer.processes.contains(pid));
    let kernel = symbolizer.kernel_locations(&window.samples()[0].kernel_stack);
    assert_eq!(
        kernel[0].lines[0].function,
        "[lost kernel stack: stack map full]"
    );
    assert_eq!(
        kernel[0].mapping.as_ref().map(|m| &*m.file),
        Some(KERNEL_MAPPING),
        "a kernel-side marker is in the kernel mapping"
    );
}

/// JIT code: an address in anonymous executable memory is named from the
/// process's perf map, and named once the map grows to cover it; both
/// forms of the map's hex numbers (with `0x`, as HotSpot writes them, and
/// without, as Node does) name code.
#[test]
fn anonymous_code_is_named_from_a_growing_perf_map() {
    use std::io::Write as _;

    const LEN: usize = 4096;
    // SAFETY: a fresh private anonymous mapping; nothing else uses it, and
    // it is unmapped at the end of the test.
    let code = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            LEN,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(code, libc::MAP_FAILED);
    let addr = code as u64 + 0x100;
    let pid = std::process::id();
    let map = PathBuf::from(format!("/tmp/perf-{pid}.map"));
    std::fs::write(&map, "").unwrap();
    let window = one_sample(pid, addr, Stack::Absent);
    let mut symbolizer = Symbolizer::default();
    let name = |symbolizer: &Symbolizer| {
        symbolizer.user_locations(pid, &window.samples()[0].user_stack)[0]
            .lines
            .first()
            .map(|l| l.function.clone())
    };

    let stats = symbolizer.prepare(
        window.samples().iter(),
        window.processes(),
        window.recorded(),
        &[],
    );
    assert_eq!((stats.resolved, stats.failed), (1, 1), "not in the map yet");
    assert_eq!(name(&symbolizer), None);

    // HotSpot's form (`jcmd PID Compiler.perfmap`): hex with `0x`.
    let mut file = std::fs::OpenOptions::new().append(true).open(&map).unwrap();
    writeln!(file, "{:#x} 0x80 void Crypto.crypt()", code as u64 + 0x800).unwrap();
    writeln!(file, "{:x} 200 JS:*jitted /app/main.js:3", code as u64).unwrap();
    drop(file);
    let stats = symbolizer.prepare(
        window.samples().iter(),
        window.processes(),
        window.recorded(),
        &[],
    );
    let named = name(&symbolizer);
    let hotspot_window = one_sample(pid, code as u64 + 0x840, Stack::Absent);
    symbolizer.prepare(hotspot_window.samples().iter(), &[], &[], &[]);
    let hotspot = symbolizer.user_locations(pid, &hotspot_window.samples()[0].user_stack)[0]
        .lines
        .first()
        .map(|l| l.function.clone());
    let _ = std::fs::remove_file(&map);
    // SAFETY: `code` is the mapping made above, not used after this.
    unsafe { libc::munmap(code, LEN) };
    assert_eq!((stats.resolved, stats.failed), (1, 0), "looked up again");
    assert_eq!(named.as_deref(), Some("JS:*jitted /app/main.js:3"));
    assert_eq!(hotspot.as_deref(), Some("void Crypto.crypt()"));
}

/// A sample with no user frames (a thread asleep all window) names its
/// process without reading its mappings; one with frames reads them.
#[test]
fn mappings_are_read_only_for_samples_with_user_frames() {
    let pid = std::process::id();
    let asleep = RawWindow::of_samples(vec![RawSample {
        user_stack: Stack::StillOffCpu,
        ..one_sample(pid, 0, Stack::Absent).samples()[0].clone()
    }]);
    let mut symbolizer = Symbolizer::default();
    symbolizer.prepare(asleep.samples().iter(), &[], &[], &[]);
    let process = symbolizer.processes.get(pid).unwrap();
    assert_eq!(
        &*process.comm,
        crate::process::procfs::comm(pid, pid).unwrap()
    );
    assert!(process.generation(0).vmas.is_empty(), "mappings not read");

    let addr = inlined_here();
    let running = one_sample(pid, addr, Stack::Absent);
    symbolizer.prepare(running.samples().iter(), &[], &[], &[]);
    let process = symbolizer.processes.get(pid).unwrap();
    let index = process.generation_of(&[addr]);
    assert!(!process.generation(index).vmas.is_empty(), "mappings read");
}

/// Runs windows `1..` over a copy of `/usr/bin/true`, reading it for the
/// offset of each window that has one; returns how many mappings of the
/// file this process holds after each window.
fn mapped_after_windows(reads: &[Option<u64>]) -> Vec<usize> {
    let dir = tempfile::tempdir().expect("temp dir");
    let copy = dir.path().join("true");
    std::fs::copy("/usr/bin/true", &copy).expect("copy /usr/bin/true");
    let mapped = || {
        let maps = std::fs::read_to_string("/proc/self/maps").expect("own maps");
        let name = copy.to_str().expect("utf-8 path");
        maps.lines().filter(|l| l.ends_with(name)).count()
    };
    let mut blaze = blazesym::symbolize::Symbolizer::new();
    let mut binaries = Binaries::new(Vec::new(), None, None);
    let key = BinaryKey::File {
        path: copy.display().to_string().into(),
        id: None,
    };
    let mut counts = Vec::new();
    for (window, offset) in (1..).zip(reads) {
        if let Some(offset) = offset {
            let todo = binaries::Todo {
                path: copy.clone(),
                dir: None,
                offsets: vec![*offset],
            };
            let (looked_up, _) = binaries.symbolize(&mut blaze, key.clone(), &todo, window);
            assert_eq!(looked_up, 1);
        }
        binaries.end_window(&mut blaze, window, EVICT_AFTER_WINDOWS);
        counts.push(mapped());
    }
    counts
}

/// blazesym keeps a file parsed while its binary brings new addresses,
/// and drops it after a window without any.
#[test]
fn a_binary_stays_parsed_only_while_it_brings_new_addresses() {
    let reads = [Some(0x1000), Some(0x1100), None, None, Some(0x1200), None];
    assert_eq!(mapped_after_windows(&reads), [1, 1, 0, 0, 1, 0]);
}

#[test]
fn binaries_past_the_bound_go_least_recently_seen_first_never_the_windows_own() {
    let mut blaze = blazesym::symbolize::Symbolizer::new();
    let mut binaries = Binaries::new(Vec::new(), None, None);
    let key = |i: usize| BinaryKey::BuildId(format!("{i:040x}").into());
    let mut see = |binaries: &mut Binaries, keys: std::ops::Range<usize>, window| {
        for i in keys {
            binaries.needs(&key(i), 0, window);
        }
        binaries.end_window(&mut blaze, window, EVICT_AFTER_WINDOWS)
    };
    let max = binaries::MAX_BINARIES;
    assert_eq!(see(&mut binaries, 0..max, 1), 0);
    // Forty new ones: forty of the first window's go.
    assert_eq!(see(&mut binaries, max..max + 40, 2), 40);
    assert_eq!(binaries.len(), max);
    assert!((max..max + 40).all(|i| binaries.has(&key(i))));
    // One seen again is among the newest: kept over the others.
    let kept = (0..max).find(|&i| binaries.has(&key(i))).unwrap();
    assert_eq!(see(&mut binaries, kept..kept + 1, 3), 0);
    assert_eq!(see(&mut binaries, max + 40..max + 41, 4), 1);
    assert!(binaries.has(&key(kept)));
    // A window with more binaries than the bound keeps all of its own.
    let busy = 10 * max..11 * max + 10;
    assert_eq!(see(&mut binaries, busy.clone(), 5), max as u64);
    assert_eq!(binaries.len(), max + 10);
    assert!(busy.into_iter().all(|i| binaries.has(&key(i))));
}

/// A window that reads more files than blazesym may keep parsed drops the
/// least recent at once, not at its end.
#[test]
fn a_window_of_many_new_binaries_keeps_a_bounded_number_parsed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut blaze = blazesym::symbolize::Symbolizer::new();
    let mut binaries = Binaries::new(Vec::new(), None, None);
    let count = parsed::MAX_PARSED + 20;
    for i in 0..count {
        let copy = dir.path().join(format!("true{i}"));
        std::fs::copy("/usr/bin/true", &copy).expect("copy /usr/bin/true");
        let todo = binaries::Todo {
            path: copy.clone(),
            dir: None,
            offsets: vec![0x1000],
        };
        let key = BinaryKey::File {
            path: copy.display().to_string().into(),
            id: None,
        };
        binaries.symbolize(&mut blaze, key, &todo, 1);
    }
    let maps = std::fs::read_to_string("/proc/self/maps").expect("own maps");
    let prefix = dir.path().to_str().expect("utf-8 path");
    let mapped: HashSet<&str> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|path| path.starts_with(prefix))
        .collect();
    assert_eq!(mapped.len(), parsed::MAX_PARSED);
    // The newest are the ones kept.
    assert!(
        mapped.contains(
            dir.path()
                .join(format!("true{}", count - 1))
                .to_str()
                .unwrap()
        )
    );
}

/// The kernel's address of `function`, from `/proc/kallsyms`.
fn kernel_address(function: &str) -> u64 {
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").expect("kallsyms");
    kallsyms
        .lines()
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            let (address, _, name) = (fields.next()?, fields.next()?, fields.next()?);
            (name == function).then(|| u64::from_str_radix(address, 16).ok())?
        })
        .filter(|&address| address != 0)
        .expect("kallsyms shows addresses (root)")
}

/// Past the bound, the kernel addresses cached are those of the window
/// being symbolized, still named.
#[test]
fn kernel_addresses_past_the_bound_keep_only_the_windows_own() {
    let schedule = kernel_address("schedule");
    let pid = std::process::id();
    let user = one_sample as *const () as usize as u64;
    let window = |frames: Vec<u64>| one_sample(pid, user, Stack::Frames(frames.into()));
    // Unnamed addresses are cached too (as not resolving).
    let unnamed = |i: u64| 0xffff_ffff_0000_0000 + i * 16;
    let mut symbolizer = Symbolizer::default();
    let first = window(
        std::iter::once(schedule)
            .chain((1..=prepare::MAX_KERNEL_ADDRESSES as u64).map(unnamed))
            .collect(),
    );
    let stats = symbolizer.prepare(
        first.samples().iter(),
        first.processes(),
        first.recorded(),
        &[],
    );
    assert_eq!(
        stats.caches.kernel_addresses,
        prepare::MAX_KERNEL_ADDRESSES as u64 + 1
    );
    assert_eq!(stats.caches.kernel_addresses_evicted, 0);

    let second = window(vec![schedule, unnamed(1)]);
    let stats = symbolizer.prepare(
        second.samples().iter(),
        second.processes(),
        second.recorded(),
        &[],
    );
    assert_eq!(stats.caches.kernel_addresses, 2);
    assert_eq!(
        stats.caches.kernel_addresses_evicted,
        prepare::MAX_KERNEL_ADDRESSES as u64 - 1
    );
    let locations = symbolizer.kernel_locations(&second.samples()[0].kernel_stack);
    assert_eq!(locations[0].lines[0].function, "schedule");
}

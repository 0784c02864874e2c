//! Real-kernel tests of where function names come from, on a program
//! shipped the way distributions ship them: stripped, with its debug
//! information in a separate file (`support::build::stripped_c_program`).
//! The stripped program has no symbol for any of the fixture's functions
//! (they are static or unexported), so every name checked here can only
//! have come from the debug file.
mod support;

use std::{
    fs,
    net::TcpListener,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use support::{
    Fixture, Profile, Profiler, build, go_pprof_raw, profile_fixture, profiles, require_root, sum,
};

/// The `cpu` thread's on-CPU samples: all of them, and those whose user
/// stack names the frameless leaf `spin` and one of its two callers.
fn cpu_thread_named(profiles: &[(PathBuf, Profile)], cpu: u32) -> (i64, i64) {
    let all = sum(profiles, "samples", |p, s| p.is_thread(s, cpu));
    let named = sum(profiles, "samples", |p, s| {
        let frames = p.user_frames(s);
        p.is_thread(s, cpu)
            && frames.iter().any(|(f, _)| *f == "spin")
            && frames
                .iter()
                .any(|(f, _)| *f == "cpu_heavy" || *f == "cpu_light")
    });
    (all, named)
}

/// Directories of one test: the program's, a scratch one, the profiles'.
struct Dirs {
    _root: tempfile::TempDir,
    bin: PathBuf,
    scratch: PathBuf,
    out: PathBuf,
    root: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().to_owned();
    let dirs = Dirs {
        bin: path.join("bin"),
        scratch: path.join("scratch"),
        out: path.join("profiles"),
        root: path,
        _root: root,
    };
    fs::create_dir_all(&dirs.bin).unwrap();
    fs::create_dir_all(&dirs.scratch).unwrap();
    dirs
}

#[test]
fn stripped_program_is_named_from_a_local_build_id_directory() {
    named_from_a_local_build_id_directory(false);
}

/// As distributions ship debug files (Debian's `-dbgsym`, `libc6-dbg`):
/// their DWARF sections compressed. They are read through a plain copy
/// in `--debug-cache`, which is kept for the next run.
#[test]
fn a_debug_file_with_compressed_sections_is_read_through_a_plain_copy() {
    let (dirs, program) = named_from_a_local_build_id_directory(true);
    let copy = dirs
        .scratch
        .join("cache")
        .join(format!("{}.debug", program.build_id));
    let data = fs::read(&copy).expect("the plain copy");
    let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(&*data).unwrap();
    let compressed: Vec<_> = object::Object::sections(&elf)
        .filter(|s| {
            let object::SectionFlags::Elf { sh_flags } = object::ObjectSection::flags(s) else {
                return false;
            };
            sh_flags & u64::from(object::elf::SHF_COMPRESSED) != 0
        })
        .filter_map(|s| object::ObjectSection::name(&s).ok().map(str::to_owned))
        .collect();
    assert!(compressed.is_empty(), "still compressed: {compressed:?}");
}

/// Profiles the stripped `natural` with its debug file (its sections
/// compressed if `compress`) under a `--debug-dir`; checks the names and
/// lines; returns the directories (`--debug-cache` is `scratch/cache`)
/// and the program.
fn named_from_a_local_build_id_directory(compress: bool) -> (Dirs, build::Stripped) {
    require_root();
    let dirs = dirs();
    let program = build::stripped_c_program("natural", &dirs.bin, &dirs.scratch);
    let debug_dir = dirs.root.join("debug");
    let installed = debug_dir
        .join(".build-id")
        .join(&program.build_id[..2])
        .join(format!("{}.debug", &program.build_id[2..]));
    fs::create_dir_all(installed.parent().unwrap()).unwrap();
    let mut objcopy = Command::new("objcopy");
    if compress {
        objcopy.arg("--compress-debug-sections=zlib");
    }
    let status = objcopy.arg(&program.debug_file).arg(&installed).status();
    assert!(status.unwrap().success(), "objcopy");

    let cache = dirs.scratch.join("cache");
    let mut fixture = Fixture::spawn_path(&program.bin, 3.0);
    let cpu = fixture.tid("cpu");
    let flags = [
        "--debug-dir",
        debug_dir.to_str().unwrap(),
        "--debug-cache",
        cache.to_str().unwrap(),
    ];
    let (_, profiles) = profile_fixture(&mut fixture, &dirs.out, &flags);
    let (all, named) = cpu_thread_named(&profiles, cpu);
    // ~300 samples in 3 s at 99 Hz; nearly all of them are in spin.
    assert!(all > 150, "only {all} samples of the cpu thread");
    assert!(
        named * 10 >= all * 9,
        "{named} of {all} cpu-thread samples named spin and its caller"
    );
    let p = &profiles[0].1;
    assert!(p.comment_value("debug_files_opened") >= 1);
    let (frames, resolved) = (
        p.comment_value("user_frames"),
        p.comment_value("user_frames_resolved"),
    );
    assert!(
        resolved * 10 >= frames * 9,
        "{resolved} of {frames} user frames resolved"
    );
    // Source lines come from the debug file's DWARF.
    let raw = go_pprof_raw(&profiles[0].0);
    assert!(raw.contains("natural.c"), "no source file in:\n{raw}");
    // libc's debug file, if installed, is compressed too.
    let copy = cache.join(format!("{}.debug", program.build_id));
    assert_eq!(copy.exists(), compress, "{}", copy.display());
    (dirs, program)
}

/// Runs the profiler on `fixture` in 1 s windows until the fixture has
/// reported, with `extra` flags; returns the profiles, oldest first.
fn profile_in_windows(
    fixture: &mut Fixture,
    out: &Path,
    extra: &[&str],
) -> Vec<(PathBuf, Profile)> {
    profile_in_windows_scraped(fixture, out, extra, None).0
}

/// As [`profile_in_windows`]; with `listen` (a port), also `/metrics` as
/// scraped just before the daemon stops.
fn profile_in_windows_scraped(
    fixture: &mut Fixture,
    out: &Path,
    extra: &[&str],
    listen: Option<&str>,
) -> (Vec<(PathBuf, Profile)>, String) {
    let pid = fixture.pid().to_string();
    let mut args = vec![
        "--pid",
        &pid,
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "1s",
        "--no-off-cpu",
    ];
    args.extend_from_slice(extra);
    if let Some(port) = listen {
        args.extend(["--listen", port]);
    }
    let running = Profiler::start(&args);
    fixture.go();
    fixture.results();
    let metrics = listen.map_or_else(String::new, |port| {
        let (status, body) = support::get(&format!("http://127.0.0.1:{port}/metrics"));
        assert_eq!(status, 200);
        String::from_utf8(body).unwrap()
    });
    running.stop();
    let profiles = profiles(out);
    for (path, _) in &profiles {
        go_pprof_raw(path);
    }
    (profiles, metrics)
}

#[test]
fn debuginfod_names_a_stripped_program_from_the_next_window_on() {
    require_root();
    let dirs = dirs();
    let program = build::stripped_c_program("natural", &dirs.bin, &dirs.scratch);
    let served_dir = dirs.root.join("served");
    fs::create_dir_all(&served_dir).unwrap();
    fs::copy(&program.debug_file, served_dir.join("natural.debug")).unwrap();
    let server = profiler_fixtures::debuginfod::Server::start(
        &served_dir,
        &dirs.root.join("debuginfod.sqlite"),
        &program.build_id,
    )
    .expect("debuginfod (Debian's debuginfod; .ci/run installs it)");
    let cache = dirs.root.join("cache");

    let mut fixture = Fixture::spawn_path(&program.bin, 5.0);
    let cpu = fixture.tid("cpu");
    let port = support::free_port().to_string();
    let (profiles, metrics) = profile_in_windows_scraped(
        &mut fixture,
        &dirs.out,
        &[
            "--debuginfod-url",
            server.url(),
            "--debuginfod-cache",
            cache.to_str().unwrap(),
        ],
        Some(&port),
    );
    drop(server);
    // /metrics counts the same download, its bytes and its time.
    let events = "profiler_window_events";
    assert!(
        (support::metric(&metrics, events, Some(("counter", "debuginfod_fetched"))) - 1.0).abs()
            < f64::EPSILON,
        "{metrics}"
    );
    assert!(support::metric(&metrics, events, Some(("counter", "debuginfod_bytes"))) > 0.0);
    assert!(
        support::metric(&metrics, events, Some(("counter", "debuginfod_failed"))).abs()
            < f64::EPSILON
    );
    // Exported (it may round to 0 ms on loopback): metric() panics if not.
    support::metric(&metrics, events, Some(("counter", "debuginfod_fetch_ms")));

    let fetched: u64 = profiles
        .iter()
        .map(|(_, p)| p.comment_value("debuginfod_fetched"))
        .sum();
    assert_eq!(fetched, 1, "one download for the one stripped program");
    assert!(
        cache.join(&program.build_id).join("debuginfo").is_file(),
        "kept in the cache directory"
    );
    // The download runs in the background while the first window is
    // profiled; it is counted in the first window symbolized after it
    // ended, and that window already has the names.
    let first_after = profiles
        .iter()
        .position(|(_, p)| p.comment_value("debuginfod_fetched") > 0)
        .unwrap();
    let (before, named_before) = cpu_thread_named(&profiles[..first_after], cpu);
    let later = &profiles[first_after..profiles.len() - 1];
    assert!(!later.is_empty(), "{} windows in all", profiles.len());
    let (all, named) = cpu_thread_named(later, cpu);
    assert!(all > 50, "only {all} samples after the download");
    assert!(
        named * 10 >= all * 9,
        "{named} of {all} cpu-thread samples named after the download"
    );
    // Before it, the stripped program's own symbols name nothing.
    assert_eq!(
        named_before, 0,
        "{named_before} of {before} samples named before the download"
    );
}

#[test]
fn stalled_debuginfod_delays_no_window_and_addresses_stay_symbolizable() {
    require_root();
    let dirs = dirs();
    let program = build::stripped_c_program("natural", &dirs.bin, &dirs.scratch);
    // A server that accepts connections and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        listener
            .incoming()
            .take(4)
            .filter_map(Result::ok)
            .collect::<Vec<_>>()
    });

    let mut fixture = Fixture::spawn_path(&program.bin, 5.0);
    let cpu = fixture.tid("cpu");
    let started = Instant::now();
    let profiles = profile_in_windows(
        &mut fixture,
        &dirs.out,
        &[
            "--debuginfod-url",
            &url,
            "--debuginfod-cache",
            dirs.root.join("cache").to_str().unwrap(),
            "--debuginfod-timeout",
            "2s",
        ],
    );
    let elapsed = started.elapsed();
    drop(held);

    // Windows kept their 1 s cadence while the request hung.
    assert!(
        profiles.len() >= 4,
        "{} windows in {elapsed:?} of 1 s windows",
        profiles.len()
    );
    let failed: u64 = profiles
        .iter()
        .map(|(_, p)| p.comment_value("debuginfod_failed"))
        .sum();
    assert_eq!(failed, 1, "the timed-out request is counted once");
    let (all, named) = cpu_thread_named(&profiles, cpu);
    assert!(all > 150, "only {all} samples of the cpu thread");
    assert_eq!(named, 0, "no names without the debug file");

    // The addresses stay addresses in the program's mapping, marked
    // unsymbolized, so a reader with the program's symbols names them
    // later. The reader here is binutils' addr2line on the unstripped
    // build (Go 1.19's pprof cannot read these binaries' build ids, so its
    // PPROF_BINARY_PATH lookup refuses them).
    let (p, location) = hottest_unresolved(&profiles, "/natural");
    let mapping =
        p.0.mapping
            .iter()
            .find(|m| m.id == location.mapping_id)
            .unwrap();
    assert!(!mapping.has_functions, "marked for later symbolization");
    assert_eq!(p.string(mapping.build_id), program.build_id);
    let file_offset = location.address - mapping.memory_start + mapping.file_offset;
    let out = Command::new("addr2line")
        .arg("-f")
        .arg("-e")
        .arg(&program.unstripped)
        .arg(format!(
            "{:#x}",
            virtual_address(&program.unstripped, file_offset)
        ))
        .output()
        .unwrap();
    let named = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        named.lines().next(),
        Some("spin"),
        "the hottest unresolved address, at file offset {file_offset:#x}"
    );
}

/// The unresolved leaf location with the most samples in a mapping whose
/// file name ends with `file`, and its profile.
fn hottest_unresolved<'a>(
    profiles: &'a [(PathBuf, Profile)],
    file: &str,
) -> (
    &'a Profile,
    &'a profiler_userspace::output::pprof::proto::Location,
) {
    let mut best = None;
    let mut most = 0;
    for (_, p) in profiles {
        for sample in &p.0.sample {
            let Some(&leaf) = sample.location_id.first() else {
                continue;
            };
            let location = &p.0.location[usize::try_from(leaf - 1).unwrap()];
            let in_file =
                p.0.mapping
                    .iter()
                    .any(|m| m.id == location.mapping_id && p.string(m.filename).ends_with(file));
            let samples = p.value(sample, "samples");
            if in_file && location.line.is_empty() && samples > most {
                most = samples;
                best = Some((p, location));
            }
        }
    }
    best.unwrap_or_else(|| panic!("no unresolved leaf in {file}"))
}

/// The virtual address that `file_offset` of the ELF file `path` loads at.
fn virtual_address(path: &Path, file_offset: u64) -> u64 {
    use object::{Object as _, ObjectSegment as _};
    let data = fs::read(path).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    elf.segments()
        .find_map(|segment| {
            let (start, size) = segment.file_range();
            (start..start + size)
                .contains(&file_offset)
                .then(|| file_offset - start + segment.address())
        })
        .expect("offset in a loadable segment")
}

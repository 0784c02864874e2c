//! Real-kernel tests of processes that live 20 to 100 ms, run one after
//! another as a build, a shell pipeline or a cron job runs them: their
//! samples must carry names, though each process is gone long before the
//! window ends and usually before the daemon's next look at `/proc`.
//!
//! The daemon takes their mappings from the kernel's mmap records as
//! they are made (`mapping_events/`). Without them, these runs named 17%
//! (a distribution's C program) to 40% of such samples: only processes
//! still alive at the daemon's 200 ms poll were read.
//!
//! Nor are most of them read under `--all`: a process whose files no
//! runtime the daemon reads has to see at once (Python's, Java's) waits to
//! be read until it has lived 100 ms past its request
//! (`unwind/waiting.rs`).
//!
//! Their stacks are whole from their first sample: the kernel asks for a
//! new process's mappings at that sample, and until the daemon has
//! published them it finds each PC's mapping in the kernel's own and the
//! table by the file mapped. Walked by frame pointer meanwhile, a `cc -O2`
//! program's first sample kept its leaf alone: with that route off, 82.7%
//! (`--all`) and 90.8% (`--comm`) of these runs' samples in the leaf had
//! their whole stack.
mod support;

use std::{collections::HashSet, path::Path, process::Command, time::Duration};

use support::{Profiler, build, go_pprof_raw, profiles, require_root};

/// On-CPU sampling frequency the tests run at (the default).
const HZ: f64 = 99.0;

/// Processes run per test: about 3 s of CPU, some 300 samples.
const RUNS: usize = 50;

/// What one run of a fixture printed about itself.
struct Run {
    pid: u32,
    cpu_ns: u64,
}

/// Runs `bin SPIN [extra…]` `RUNS` times, one after another, each spinning
/// between 15 and 90 ms (drawn at random: the processes live 20 to 100 ms
/// with their start and exit), and returns what each printed.
fn run_loop(bin: &Path, extra: &[&str]) -> Vec<Run> {
    let mut seed = u64::from(std::process::id()) | 1;
    (0..RUNS)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let spin_ms = 15 + seed % 76;
            let out = Command::new(bin)
                .arg(format!("0.{spin_ms:03}"))
                .args(extra)
                .output()
                .expect("run fixture");
            assert!(out.status.success(), "{}: {out:?}", bin.display());
            let text = String::from_utf8_lossy(&out.stdout);
            let (_, rest) = text.trim().split_once(' ').expect("fixture line");
            let fields = profiler_fixtures::client::fields(rest);
            Run {
                pid: u32::try_from(fields["pid"]).unwrap(),
                cpu_ns: fields["cpu_ns"],
            }
        })
        .collect()
}

/// Profiles a loop of `bin` under `args`, then checks that at least 90% of
/// the loop's on-CPU samples have a named user frame, and that the
/// samples are there at all (at least 80% of the CPU time the processes
/// measured, at 99 Hz). With `whole`, the stack of the function the
/// fixture spins in, leaf first: at least 97% of the samples whose leaf it
/// is have that whole stack. Then the binary runs once before the loop:
/// its table is built at its first run's first sample (a few milliseconds,
/// some hundreds in this debug build), and that run's samples until then
/// are walked by frame pointer.
#[expect(clippy::cast_precision_loss, reason = "sample counts")]
fn brief_processes_are_named(args: &[&str], bin: &Path, extra: &[&str], whole: Option<&[&str]>) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut all = args.to_vec();
    all.extend(["--interval", "60s", "--output-dir", out.to_str().unwrap()]);
    let profiler = Profiler::start(&all);
    std::thread::sleep(Duration::from_millis(250));
    if whole.is_some() {
        let warm = Command::new(bin).arg("0.3").args(extra).output().unwrap();
        assert!(warm.status.success(), "{warm:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let runs = run_loop(bin, extra);
    // Past the daemon's next chunk, so the last exits are read with it.
    std::thread::sleep(Duration::from_millis(500));
    profiler.stop();
    let files = profiles(&out);
    let pids: HashSet<u32> = runs.iter().map(|r| r.pid).collect();
    let (mut samples, mut named, mut named_leaf) = (0, 0, 0);
    let (mut recorded, mut lost) = (0, 0);
    let (mut in_leaf, mut whole_stacks, mut by_file) = (0, 0, 0);
    let (mut waited, mut unread) = (0, 0);
    for (path, profile) in &files {
        go_pprof_raw(path);
        recorded += profile.comment_value("process_images_recorded");
        lost += profile.comment_value("mapping_records_lost");
        by_file += profile.comment_value("unwind_mappings_by_file");
        waited = waited.max(profile.comment_value("unwind_requests_waited_total"));
        unread = unread.max(profile.comment_value("unwind_exited_unread_total"));
        for sample in pids.iter().flat_map(|&pid| profile.samples_of(pid)) {
            let n = profile.value(sample, "samples");
            let frames = profile.user_frames(sample);
            samples += n;
            if frames.iter().any(|(function, _)| !function.is_empty()) {
                named += n;
            }
            if frames
                .first()
                .is_some_and(|(function, _)| !function.is_empty())
            {
                named_leaf += n;
            }
            if let Some(whole) = whole
                && frames.first().is_some_and(|(f, _)| *f == whole[0])
            {
                in_leaf += n;
                if frames.iter().map(|(f, _)| *f).eq(whole.iter().copied()) {
                    whole_stacks += n;
                }
            }
        }
    }
    let cpu_ns: u64 = runs.iter().map(|r| r.cpu_ns).sum();
    let expected = cpu_ns as f64 * HZ / 1e9;
    let share = named as f64 / samples.max(1) as f64;
    eprintln!(
        "{args:?} {}: {samples} samples for {expected:.0} expected, \
         {named} with a named user frame ({:.1}%), {named_leaf} with a named leaf, \
         {waited} mapping requests waited, {unread} processes exited unread",
        bin.display(),
        share * 100.0
    );
    assert!(recorded > 0, "no image taken from the mmap records");
    // Under `--all`, processes that mapped no runtime's file that cannot
    // wait (Go's labels can) are read only once they live 100 ms past
    // their request's first serve: most of these are gone by then, and
    // never read. (`--comm` publishes its targets at their exec.)
    if args.contains(&"--all") {
        assert!(
            unread >= (RUNS / 2) as u64,
            "{unread} processes exited unread, of {RUNS}"
        );
    }
    assert_eq!(lost, 0, "mmap records lost");
    assert!(
        samples as f64 >= 0.8 * expected,
        "{samples} samples of the loop for {expected:.0} expected"
    );
    assert!(
        share >= 0.9,
        "{named} of {samples} samples have a named user frame ({:.1}%)",
        share * 100.0
    );
    if whole.is_some() {
        eprintln!(
            "{whole_stacks} of {in_leaf} samples in {whole:?} have it whole; \
             {by_file} mappings found by file"
        );
        assert!(in_leaf * 2 >= samples, "{in_leaf} of {samples} in the leaf");
        assert!(by_file > 0, "no mapping found by file");
        assert!(
            whole_stacks * 100 >= in_leaf * 97,
            "{whole_stacks} of {in_leaf} samples have the whole stack {whole:?}"
        );
    }
}

/// A `cc -O2` program's stack as it spins, leaf first.
const C_STACK: &[&str] = &[
    "brief_work",
    "main",
    "__libc_start_call_main",
    "__libc_start_main_impl",
    "_start",
];

#[test]
fn all_names_brief_c_processes() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::c_program("short_lived", dir.path());
    brief_processes_are_named(&["--all"], &bin, &["0"], Some(C_STACK));
}

#[test]
fn comm_names_brief_c_processes() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::c_program("short_lived", dir.path());
    brief_processes_are_named(
        &["--comm", "short_lived", "--wait"],
        &bin,
        &["0"],
        Some(C_STACK),
    );
}

#[test]
fn all_names_brief_stripped_go_processes() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::stripped_go_program("brief", dir.path());
    brief_processes_are_named(&["--all"], &bin, &[], None);
}

#[test]
fn comm_names_brief_stripped_go_processes() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::stripped_go_program("brief", dir.path());
    brief_processes_are_named(&["--comm", "brief", "--wait"], &bin, &[], None);
}

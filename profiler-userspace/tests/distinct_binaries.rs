//! Real-kernel test of the daemon's memory on a host that keeps running
//! new binaries (a build host: every link makes one): thousands of
//! distinct short-lived programs run once each under `--all`. The caches
//! that hold something per binary stay within their bounds. The daemon's
//! RSS after each tenth of the programs is printed, not held: it steps
//! up at each window's end by that window's work, so where the marks fall
//! against the window ends moves it by more than a leak of these sizes
//! would (a CI run read +17% over the last quarter, local runs +0 to +3%);
//! bench section 16 measures it.
//!
//! The programs are `distinct.c` at plain `cc -O2`, copied with a build id
//! of its own per copy (a different program to every cache keyed by build
//! id or file). The windows are 5 s long, and the programs run in less
//! than ten of them, so nothing is dropped for being unseen for ten
//! windows: only the bounds hold.
mod support;

use std::process::Command;

use support::{Profiler, build, profiles, release_profiler, require_root};

/// Programs run, two at a time.
const PROGRAMS: usize = 5_000;
/// Their CPU time each (ms): at two at a time, under 200 new binaries a
/// second, fewer than a bound's worth in one window.
const WORK_MS: &str = "10";

/// The symbolizer's and the unwinder's bounds on binaries no longer seen
/// (`symbolize/binaries.rs`, `unwind/mod.rs`).
const MAX_BINARIES: u64 = 1_024;
/// Files the walk's runtimes remember what they made of, at most
/// (`runtimes/file_memo.rs`).
const RUNTIME_FILES: u64 = profiler_common::bound::MEMO_ENTRIES as u64;
/// Binaries the host's own live processes map (their executables and
/// libraries), which the unwinder keeps past its bound on unused ones.
const HOST_BINARIES: u64 = 512;

/// `pid`'s resident memory, in kB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap()
}

#[test]
fn thousands_of_distinct_binaries_keep_the_caches_bounded() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::c_program("distinct", dir.path());
    let copies = profiler_fixtures::distinct::copies(&bin, dir.path(), PROGRAMS).unwrap();
    let out = dir.path().join("out");
    // Memory as users run it: the optimised build.
    let profiler = Profiler::start_command(
        release_profiler(),
        &[
            "--all",
            "--interval",
            "5s",
            "--frequency",
            "499",
            "--output-dir",
            out.to_str().unwrap(),
        ],
    );
    let mut rss = Vec::new();
    for (i, pair) in copies.chunks(2).enumerate() {
        let mut running: Vec<_> = pair
            .iter()
            .map(|p| Command::new(p).arg(WORK_MS).spawn().unwrap())
            .collect();
        for child in &mut running {
            assert!(child.wait().unwrap().success());
        }
        if (2 * i + 2) % (PROGRAMS / 10) == 0 {
            rss.push(rss_kb(profiler.pid()));
        }
    }
    profiler.stop();
    let windows = profiles(&out);
    let most = |name: &str| {
        windows
            .iter()
            .map(|(_, p)| p.comment_value(name))
            .max()
            .unwrap()
    };
    eprintln!(
        "{} windows; RSS after each tenth (MB): {:?}; most cached: symbolizer {}, \
         unwinder {}, runtimes' memos {}, {}, {}; evicted: symbolizer {}, unwinder {}",
        windows.len(),
        rss.iter().map(|kb| kb / 1024).collect::<Vec<_>>(),
        most("symbol_binaries_cached"),
        most("unwind_binaries_cached"),
        most("python_binaries_cached"),
        most("go_label_binaries_cached"),
        most("thread_ctx_binaries_cached"),
        windows
            .iter()
            .map(|(_, p)| p.comment_value("symbol_binaries_evicted"))
            .sum::<u64>(),
        most("unwind_binaries_evicted_total"),
    );
    let named: u64 = windows
        .iter()
        .map(|(_, p)| p.comment_value("user_frames_resolved"))
        .sum();
    assert!(
        named > PROGRAMS as u64,
        "the programs were sampled and named"
    );
    assert!(most("symbol_binaries_cached") <= MAX_BINARIES);
    assert!(most("unwind_binaries_cached") <= MAX_BINARIES + HOST_BINARIES);
    // Every program's executable is looked at by the runtimes the walk
    // reads (is it a Python interpreter, Go, does it define the thread
    // context variable? The JVM's looks at libjvm only): more programs
    // than their memo's bound ran, so it filled and dropped its oldest
    // quarter.
    for memo in [
        "python_binaries_cached",
        "go_label_binaries_cached",
        "thread_ctx_binaries_cached",
    ] {
        let cached = most(memo);
        assert!(
            (RUNTIME_FILES * 3 / 4..=RUNTIME_FILES).contains(&cached),
            "{memo}: {cached}"
        );
    }
}

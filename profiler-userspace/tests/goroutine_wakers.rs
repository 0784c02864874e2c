//! Real-kernel tests of `--goroutine-wakers`: each goroutine's wait that
//! the goroutine view saw names the goroutine that ended it, in the
//! `goroutine_wakers` sample type (the parked stack, a `[woken by
//! goroutine N]` frame, the waker's stack above it), and the critical
//! path follows goroutines to the code they waited for.
//!
//! The fixture is `chanwake.go`, built as vendors ship Go (stripped) by
//! Debian's Go 1.19 and each toolchain `cargo xtask setup` installs: a
//! consumer goroutine waits in `main.consumerWait` on an unbuffered
//! channel that a relay goroutine fills from `main.relaySend` with what it
//! received from a producer goroutine, which computes 5 ms an item; a
//! sleeper naps 3 ms at a time; a reader waits on a loopback socket that
//! a writer feeds every 3 ms. The consumer measures its own waiting time,
//! and the relay and the consumer the handoffs (from a send to their
//! receive's return): the truth the rows are held to.
mod support;

use std::process::Command;

use support::{
    Profiler,
    checks::{Chanwake, goroutine_wakers},
    go, profiles, release_profiler, require_root,
};

/// How long each fixture runs.
const SECONDS: &str = "3";

#[test]
fn a_goroutine_waiting_on_a_channel_names_the_goroutine_that_sent() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bins: Vec<(String, std::path::PathBuf)> = go::toolchains()
        .iter()
        .enumerate()
        .map(|(i, toolchain)| {
            let bin = go::build(
                toolchain,
                "chanwake",
                dir.path(),
                &format!("chanwake{i}"),
                true,
            );
            (go::version(toolchain), bin)
        })
        .collect();
    let out = dir.path().join("out");
    // Optimised, as users run it: the goroutine reader's reads preempt
    // the fixture's threads (it runs in SCHED_FIFO), and a slow read
    // catches a goroutine it kept from running runnable.
    let daemon = Profiler::start_command(
        release_profiler(),
        &[
            "--all",
            "--goroutine-wakers",
            "--output-dir",
            out.to_str().unwrap(),
        ],
    );
    let runs: Vec<(String, Chanwake)> = bins
        .iter()
        .map(|(version, bin)| {
            // A binary is probed once its first process is read: this run's
            // waits before that have no waker.
            let warm = Command::new(bin).arg("0.5").output().unwrap();
            assert!(warm.status.success(), "{version}: {warm:?}");
            let run = Command::new(bin).arg(SECONDS).output().unwrap();
            assert!(run.status.success(), "{version}: {run:?}");
            let text = String::from_utf8_lossy(&run.stdout);
            let (_, fields) = text.trim().split_once(' ').unwrap();
            let fields = profiler_fixtures::client::fields::<i64>(fields);
            (version.clone(), Chanwake::of(|name| fields[name]))
        })
        .collect();
    let log = daemon.stop();
    let files = profiles(&out);
    let mut failures = Vec::new();
    for (version, run) in &runs {
        failures.extend(goroutine_wakers(&files, (version, run)));
    }
    assert!(failures.is_empty(), "{failures:#?}\n{log}");
}

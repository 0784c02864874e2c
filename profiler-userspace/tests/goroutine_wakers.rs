//! Real-kernel tests of `--goroutine-wakers`: each goroutine's wait that
//! the goroutine view saw names the goroutine that ended it, in the
//! `goroutine_wakers` sample type (the parked stack, a `[woken by
//! goroutine N]` frame, the waker's stack above it).
//!
//! The fixture is `chanwake.go`, built as vendors ship Go (stripped) by
//! Debian's Go 1.19 and each toolchain `cargo xtask setup` installs: a
//! consumer goroutine waits in `main.consumerWait` on an unbuffered
//! channel that a producer goroutine fills from `main.producerSend` after
//! computing 2 ms; a sleeper naps 3 ms at a time; a reader waits on a
//! loopback socket that a writer feeds every 3 ms. The consumer measures
//! its own waiting time, the truth the rows are held to.
mod support;

use std::process::Command;

use support::{Profiler, checks::goroutine_wakers, go, profiles, require_root};

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
    let daemon = Profiler::start(&[
        "--all",
        "--goroutine-wakers",
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    let runs: Vec<(String, u32, i64)> = bins
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
            let pid = u32::try_from(fields["pid"]).unwrap();
            (version.clone(), pid, fields["waited_ns"])
        })
        .collect();
    let log = daemon.stop();
    let files = profiles(&out);
    let mut failures = Vec::new();
    for (version, pid, waited_ns) in runs {
        failures.extend(goroutine_wakers(&files, (&version, pid, waited_ns)));
    }
    assert!(failures.is_empty(), "{failures:#?}\n{log}");
}

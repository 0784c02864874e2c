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

use std::{path::Path, process::Command};

use support::{
    Profiler,
    checks::{Chanwake, Timing, goroutine_wakers},
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
            chanwake(bin, &["0.5"]);
            (version.clone(), chanwake(bin, &[SECONDS]))
        })
        .collect();
    let log = daemon.stop();
    let files = profiles(&out);
    let mut failures = Vec::new();
    for (version, run) in &runs {
        failures.extend(goroutine_wakers(&files, (version, run), Timing::Real));
    }
    assert!(failures.is_empty(), "{failures:#?}\n{log}");
}

/// What a run of `bin` with `args` measured of itself.
fn chanwake(bin: &Path, args: &[&str]) -> Chanwake {
    let run = Command::new(bin).args(args).output().unwrap();
    assert!(run.status.success(), "{}: {run:?}", bin.display());
    let text = String::from_utf8_lossy(&run.stdout);
    let (_, fields) = text.trim().split_once(' ').unwrap();
    let fields = profiler_fixtures::client::fields::<i64>(fields);
    Chanwake::of(|name| fields[name])
}

/// `--what-if` through goroutines: the estimate one window gives of how
/// much faster each goroutine of `chanwake.go`'s pipeline would go if
/// `main.producerCompute` took half its time, held to the change in items
/// a second measured when it does (the producer computing 2.5 ms an item
/// instead of 5), within 20%.
#[test]
fn what_if_estimates_a_goroutine_pipeline_s_speed_up() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let toolchain = go::toolchains().pop().unwrap();
    let bin = go::build(&toolchain, "chanwake", dir.path(), "chanwake", true);
    let out = dir.path().join("out");
    let daemon = Profiler::start_command(
        release_profiler(),
        &[
            "--all",
            "--goroutine-wakers",
            "--what-if",
            "main.producerCompute:50",
            "--output-dir",
            out.to_str().unwrap(),
        ],
    );
    chanwake(&bin, &["0.5"]);
    let before = chanwake(&bin, &[SECONDS, "5"]);
    let after = chanwake(&bin, &[SECONDS, "2.5"]);
    let log = daemon.stop();
    #[expect(clippy::cast_precision_loss, reason = "item counts")]
    let measured = after.items as f64 / before.items as f64 - 1.0;
    let of_run = format!(" of {} ", before.pid);
    let estimates: Vec<(String, f64)> = profiles(&out)
        .iter()
        .flat_map(|(_, p)| {
            p.comments()
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|c| c.starts_with("what_if_") && c.contains(&of_run))
        .filter_map(|c| {
            let (_, pct) = c.rsplit_once(' ')?;
            Some((
                c.clone(),
                pct.trim_end_matches('%').parse::<f64>().ok()? / 100.0,
            ))
        })
        .collect();
    eprintln!(
        "measured {:+.1}% items a second: {estimates:?}",
        measured * 100.0
    );
    let consumer = format!("=goroutine 1{of_run}");
    assert!(
        estimates.iter().any(|(line, _)| line.contains(&consumer)),
        "no estimate for the consumer (goroutine 1) of pid {}: {estimates:?}\n{log}",
        before.pid
    );
    for (line, estimate) in &estimates {
        assert!(
            (estimate - measured).abs() <= 0.2 * measured,
            "{line}: measured {:+.1}% (within 20% of it)",
            measured * 100.0
        );
    }
}

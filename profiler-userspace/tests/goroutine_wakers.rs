//! Real-kernel tests of `--goroutine-wakers`: each goroutine's wait that
//! the goroutine view saw names the goroutine that ended it, in the
//! `goroutine_wakers` sample type (the parked stack, a `[woken by
//! goroutine N]` frame, the waker's stack above it).
//!
//! The fixture is `chanwake.go`, built as vendors ship Go (stripped) by
//! Debian's Go 1.19 and each toolchain `cargo xtask setup` installs: a
//! consumer goroutine waits in `main.consumerWait` on an unbuffered
//! channel that a producer goroutine fills from `main.producerSend` after
//! computing 2 ms; a sleeper naps 3 ms at a time. The consumer measures
//! its own waiting time, the truth the rows are held to.
mod support;

use std::{collections::HashMap, process::Command};

use support::{Profile, Profiler, go, profiles, require_root};

/// How long each fixture runs.
const SECONDS: &str = "3";

/// One process's goroutine weights under a parked function.
#[derive(Debug, Default)]
struct Waits {
    /// `goroutine` weight, parked (state waiting) under the function.
    parked: i64,
    /// `goroutine` weight runnable under it: woken, waiting for a thread
    /// (counted in the fixture's own time, not in the wakers' rows).
    runnable: i64,
    /// `goroutine_wakers` weight under it, by joint.
    by: HashMap<String, i64>,
    /// Of that, with `above` in the waker's part.
    with_frame: i64,
}

impl Waits {
    fn of(profiles: &[(std::path::PathBuf, Profile)], pid: u32, parked: &str, above: &str) -> Self {
        let mut waits = Waits::default();
        for (_, p) in profiles {
            for sample in p.samples_of(pid) {
                let functions = p.functions(sample);
                let joint = functions.iter().position(|f| f.starts_with("[woken by "));
                let Some(joint) = joint else {
                    if functions.contains(&parked) {
                        match p.str_label(sample, "state") {
                            Some("waiting") => waits.parked += p.value(sample, "goroutine"),
                            Some("runnable") => waits.runnable += p.value(sample, "goroutine"),
                            _ => {}
                        }
                    }
                    continue;
                };
                let weight = p.value(sample, "goroutine_wakers");
                if weight == 0 || !functions[joint..].contains(&parked) {
                    continue;
                }
                *waits.by.entry(functions[joint].to_owned()).or_default() += weight;
                if functions[..joint].contains(&above) {
                    waits.with_frame += weight;
                }
            }
        }
        waits
    }

    fn total(&self) -> i64 {
        self.by.values().sum()
    }
}

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
        let consumer = Waits::of(&files, pid, "main.consumerWait", "main.producerSend");
        let sleeper = Waits::of(&files, pid, "main.sleeperNap", "");
        eprintln!(
            "{version}: consumer waited {waited_ns} ns by itself: {consumer:?}; sleeper: {sleeper:?}"
        );
        #[expect(clippy::cast_precision_loss, reason = "shares")]
        let share = |a: i64, b: i64| a as f64 / b.max(1) as f64;
        // The view's own reading of the waits, against the fixture's.
        let seen = share(consumer.parked + consumer.runnable, waited_ns);
        // Every wait the view saw, named once, nearly all by the producer.
        let named = share(consumer.total(), consumer.parked);
        let by_sender = share(consumer.with_frame, consumer.parked);
        if !(0.8..1.2).contains(&seen) || !(0.95..1.05).contains(&named) || by_sender < 0.9 {
            failures.push(format!(
                "{version}: the consumer's waits read {seen:.3} of its own, {named:.3} of them \
                 named, {by_sender:.3} by main.producerSend: {consumer:?}"
            ));
        }
        let joints: Vec<&String> = consumer.by.keys().collect();
        if !consumer
            .by
            .keys()
            .any(|j| j.starts_with("[woken by goroutine "))
        {
            failures.push(format!(
                "{version}: no goroutine named as waker: {joints:?}"
            ));
        }
        // A timer wakes a sleeper from the scheduler (`checkTimers`, on the
        // thread's system stack): no goroutine is the waker.
        let by_runtime = share(
            sleeper
                .by
                .get("[woken by the Go runtime]")
                .copied()
                .unwrap_or(0),
            sleeper.parked,
        );
        if by_runtime < 0.9 {
            failures.push(format!(
                "{version}: {by_runtime:.3} of the sleeper's naps woken by the runtime: {sleeper:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}\n{log}");
}

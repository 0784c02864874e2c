//! The goroutine view on a host its target keeps busy
//! (`profiler-fixtures/go/busy.go`: a goroutine per CPU computing for a
//! random 1 to 4 ms, then sleeping 2 ms in `main.snooze`): the `wall` time
//! under `main.snooze` against the time the program measures in it, run
//! after run. Its reads must not land in sleeps more often than time
//! does, however busy the CPUs are (a release build whose reader ran at
//! normal priority read 3 to 6% over at 4 s a run; demoted by hand from
//! `SCHED_FIFO`, 8 to 12% over at 16 s). The daemon is the
//! release build users run: a debug build's reader, ten times slower,
//! read 1 to 7% under whatever its priority, which says nothing of the
//! product.
mod support;

use std::{process::Command, time::Duration};

use support::{Fixture, Profiler, go, profiles, release_profiler, require_root};

const RUNS: usize = 5;
/// Each run: at the default 99 reads a second, a 4 s run's share under
/// `main.snooze` varied by about 2.5% (one standard deviation) with no
/// bias at all; 16 s halves that.
const SECONDS: &str = "16";
/// The median run within 5% of the measured time: a bias moves every run,
/// a busy moment of a 2-CPU host moves one (in CI, single runs read 0.932
/// to 0.945 beside others at 0.98 to 1.02).
const TOLERANCE: f64 = 0.05;
/// Every run within 10%: one run that far off is no outlier.
const OUTLIER: f64 = 0.10;

#[test]
fn the_goroutine_view_is_unbiased_while_the_target_keeps_the_cpus_busy() {
    require_root();
    let toolchain = go::toolchains().pop().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bin = go::build(&toolchain, "busy", dir.path(), "busy", true);
    let out = dir.path().join("out");
    let running = Profiler::start_command(
        release_profiler(),
        &[
            "--comm",
            "busy",
            "--wait",
            "--output-dir",
            out.to_str().unwrap(),
            "--interval",
            "300s",
        ],
    );
    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let mut command = Command::new(&bin);
        command.arg(SECONDS);
        let mut fixture = Fixture::spawn_command(command);
        // Adopted by name and looked at by the goroutine reader before
        // its measured phase.
        std::thread::sleep(Duration::from_millis(1500));
        fixture.go();
        let truth = fixture.results();
        runs.push((fixture.pid(), truth));
        // Each fixture lingers until dropped (stdin closed): the next
        // starts on a quiet host.
        drop(fixture);
    }
    let log = running.stop();
    let profiles = profiles(&out);
    assert_eq!(profiles.len(), 1, "one window\n{log}");
    let profile = &profiles[0].1;
    let mut failures = Vec::new();
    let mut ratios = Vec::new();
    for (pid, truth) in &runs {
        let ours: i64 = profile
            .samples_of(*pid)
            .filter(|s| profile.functions(s).contains(&"main.snooze"))
            .map(|s| profile.value(s, "wall"))
            .sum();
        let measured = truth["snooze_ns"];
        #[expect(clippy::cast_precision_loss, reason = "a ratio")]
        let ratio = ours as f64 / measured as f64;
        eprintln!(
            "pid {pid}: {} goroutines, under main.snooze {ratio:.3} of measured ({ours} ns, {measured} ns), compute {} ns",
            truth["goroutines"], truth["compute_ns"]
        );
        if (ratio - 1.0).abs() > OUTLIER {
            failures.push(format!(
                "pid {pid}: {ours} ns under main.snooze, measured {measured} ns ({ratio:.3})"
            ));
        }
        ratios.push(ratio);
    }
    ratios.sort_by(f64::total_cmp);
    let median = ratios[RUNS / 2];
    if (median - 1.0).abs() > TOLERANCE {
        failures.push(format!("median run {median:.3} of measured ({ratios:.3?})"));
    }
    assert!(failures.is_empty(), "{failures:#?}\n{log}");
}

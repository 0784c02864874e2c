//! Section 11: what the goroutine view costs. A Go program's throughput on
//! a goroutine ping-pong over channels (`go/chanpingpong.go`), with the
//! view off and at defaults; and the daemon's CPU reading a program of
//! 10,000 goroutines.
use std::{
    fmt::Write as _,
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{
    overhead::{Measured, overhead, table},
    tools::{attach, baseline, profiler, workload},
};
use crate::procfs::cpu_ticks;

/// The Go fixture, as `build_release_with_fixtures` names it.
use crate::workspace::GO_FIXTURE as FIXTURE;
/// Goroutines parked for good in the daemon-cost runs.
const MANY: &str = "10000";
const SECONDS: u64 = 15;

/// Writes the section; returns the ping-pong's slowdown at defaults.
pub(super) fn goroutine_view(report: &mut String) -> anyhow::Result<f64> {
    let configs = [
        baseline(),
        profiler(
            "profiler --pid --goroutine-frequency 0 (no goroutine view)",
            &["--pid", "{pid}", "--goroutine-frequency", "0"],
        ),
        profiler(
            "profiler --pid (defaults: goroutines read 99 times a second)",
            &["--pid", "{pid}"],
        ),
    ];
    let measured: Vec<Measured> = overhead(FIXTURE, "round_trips_per_sec", &configs)?;
    table(
        report,
        "11. The goroutine view: a goroutine ping-pong over channels (Go 1.19)",
        "round trips/s",
        &measured,
    )?;
    writeln!(
        report,
        "The daemon's CPU (utime + stime, % of one core) over {SECONDS} s while the same program also holds {MANY} goroutines parked in a channel receive:\n"
    )?;
    writeln!(report, "| configuration | daemon CPU (% of one core) |")?;
    writeln!(report, "| --- | --- |")?;
    for (name, args) in [
        (
            "--goroutine-frequency 0",
            vec!["--pid", "{pid}", "--goroutine-frequency", "0"],
        ),
        ("defaults (99 Hz)", vec!["--pid", "{pid}"]),
        (
            "--goroutine-frequency 19",
            vec!["--pid", "{pid}", "--goroutine-frequency", "19"],
        ),
    ] {
        let cpu = daemon_cpu(&args)?;
        writeln!(report, "| {name} | {cpu:.2} |")?;
    }
    writeln!(report)?;
    Ok(measured[2].slowdown())
}

/// The daemon's CPU, in % of one core, profiling the fixture with
/// [`MANY`] parked goroutines.
fn daemon_cpu(args: &[&str]) -> anyhow::Result<f64> {
    let mut workload = workload(FIXTURE, &[&(SECONDS + 2).to_string(), MANY])?;
    let config = profiler("", args);
    let attached = attach(&config, workload.pid())?.context("profiler")?;
    let pid = attached.child.id();
    let ticks0 = cpu_ticks(pid)?;
    let started = Instant::now();
    workload.go()?;
    sleep(Duration::from_secs(SECONDS));
    let ticks = cpu_ticks(pid)? - ticks0;
    let elapsed = started.elapsed().as_secs_f64();
    attached.stop()?;
    #[expect(clippy::cast_precision_loss, reason = "a percentage")]
    Ok(ticks as f64 / elapsed)
}

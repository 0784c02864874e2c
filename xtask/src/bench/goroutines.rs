//! Section 11: what the goroutine view costs. A Go program's throughput on
//! a goroutine ping-pong over channels (`go/chanpingpong.go`), with the
//! view off, at defaults and with `--goroutine-wakers`; the daemon's CPU reading a program of 10,000
//! goroutines, plain and under pprof labels; and an on-CPU sample's kernel
//! time with the running goroutine's labels read, against without.
use std::{
    fmt::Write as _,
    process::Command,
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{
    kernel_cost::{Cost, find, per_run_costs_on},
    overhead::{Measured, overhead, table},
    tools::{RUN_SECS, attach, baseline, profiler, release, workload},
    unwinding::walk_cost,
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
        profiler(
            "profiler --pid --goroutine-wakers (a probe on runtime.ready)",
            &["--pid", "{pid}", "--goroutine-wakers"],
        ),
    ];
    let measured: Vec<Measured> = overhead(FIXTURE, "round_trips_per_sec", &configs)?;
    table(
        report,
        "11. The goroutine view: a goroutine ping-pong over channels (Go 1.19)",
        "round trips/s",
        &measured,
    )?;
    wakeup_cost(report, &measured)?;
    writeln!(
        report,
        "The daemon's CPU (utime + stime, % of one core) over {SECONDS} s while the same program also holds {MANY} goroutines parked in a channel receive:\n"
    )?;
    writeln!(report, "| configuration | daemon CPU (% of one core) |")?;
    writeln!(report, "| --- | --- |")?;
    for (name, args, labelled) in [
        (
            "--goroutine-frequency 0",
            vec!["--pid", "{pid}", "--goroutine-frequency", "0"],
            false,
        ),
        ("defaults (99 Hz)", vec!["--pid", "{pid}"], false),
        (
            "defaults, every goroutine under pprof labels (a set each, of 16 distinct, 3 labels)",
            vec!["--pid", "{pid}"],
            true,
        ),
        (
            "--goroutine-frequency 19",
            vec!["--pid", "{pid}", "--goroutine-frequency", "19"],
            false,
        ),
    ] {
        let cpu = daemon_cpu(&args, labelled)?;
        writeln!(report, "| {name} | {cpu:.2} |")?;
    }
    writeln!(report)?;
    label_cost(report)?;
    Ok(measured[2].slowdown())
}

/// What `--goroutine-wakers` adds to each goroutine wakeup: a round trip
/// readies two goroutines, each through the probe.
fn wakeup_cost(report: &mut String, measured: &[Measured]) -> anyhow::Result<()> {
    let median_rate = |m: &Measured| {
        let mut rates = m.rates.clone();
        rates.sort_by(f64::total_cmp);
        rates.get(rates.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let (view, wakers) = (median_rate(&measured[2]), median_rate(&measured[3]));
    let per_wakeup_us = (1.0 / wakers - 1.0 / view) / 2.0 * 1e6;
    let args = ["--pid", "{pid}", "--goroutine-wakers"];
    let costs = per_run_costs_on(FIXTURE, &[RUN_SECS, "0"], &args)?;
    let program = find(&costs, "go_ready");
    writeln!(
        report,
        "With `--goroutine-wakers` each round trip (two goroutine wakeups, each through the \
         probe on `runtime.ready`) takes {:.2} µs longer than at defaults (median rates {view:.0} \
         and {wakers:.0} round trips/s): {per_wakeup_us:.2} µs a wakeup, of which the program \
         (bpf_stats, {:.0} runs) is {:.2} µs and the rest the uprobe's own path (the breakpoint's \
         trap, the branch emulated, the return).\n",
        per_wakeup_us * 2.0,
        program.map_or(f64::NAN, Cost::run_count),
        program.map_or(f64::NAN, |c| c.ns_per_run() / 1e3),
    )?;
    Ok(())
}

/// An on-CPU sample's kernel time (bpf_stats) in the ping-pong, its
/// goroutines plain and under pprof labels, at 999 Hz.
fn label_cost(report: &mut String) -> anyhow::Result<()> {
    writeln!(
        report,
        "`on_cpu_sample`'s run_time_ns / run_cnt (bpf_stats) at 999 Hz (`--no-off-cpu`) on the same ping-pong (one copy per CPU, as section 6), its goroutines plain and each under pprof labels (the walk then follows the thread to its goroutine and reads the label set's identity, and the daemon reads each new set once):\n"
    )?;
    writeln!(report, "| goroutines | on_cpu_sample ns |")?;
    writeln!(report, "| --- | --- |")?;
    let args = ["--no-off-cpu", "--frequency", "999"];
    let mut costs = Vec::new();
    for (name, labelled) in [("plain", false), ("labelled", true)] {
        let mut command = Command::new(release(FIXTURE));
        command.args([RUN_SECS, "0"]);
        if labelled {
            command.arg("labelled");
        }
        let (per_run, _) = walk_cost(&command, &args)?;
        let ns = per_run
            .iter()
            .find(|(n, _)| n == "on_cpu_sample")
            .map_or(f64::NAN, |(_, ns)| *ns);
        writeln!(report, "| {name} | {ns:.0} |")?;
        costs.push(ns);
    }
    writeln!(
        report,
        "\nWith labels, a sample costs {:.2} times a plain Go sample.\n",
        costs[1] / costs[0]
    )?;
    Ok(())
}

/// The daemon's CPU, in % of one core, profiling the fixture with
/// [`MANY`] parked goroutines (under labels when `labelled`).
fn daemon_cpu(args: &[&str], labelled: bool) -> anyhow::Result<f64> {
    let seconds = (SECONDS + 2).to_string();
    let mut fixture_args = vec![seconds.as_str(), MANY];
    if labelled {
        fixture_args.push("labelled");
    }
    let mut workload = workload(FIXTURE, &fixture_args)?;
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

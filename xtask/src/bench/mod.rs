//! `cargo xtask bench`: overhead and accuracy, measured on this machine in
//! one run, as ratios, next to the tools users would otherwise pick. Writes
//! BENCHMARKS.md. Needs root (it loads BPF), like the tests.
//!
//! Every workload is a fixture from profiler-fixtures with the tests'
//! protocol: it prints `ready pid=P`, waits for "go" while the tool under
//! test attaches, runs for a fixed time and prints its own measurement.
use std::{fmt::Write as _, fs, process::Command};

use anyhow::Context as _;

use crate::workspace::workspace_root;

mod accuracy;
mod against;
mod brief;
mod churn;
mod containers;
mod daemon_cost;
mod daemon_metrics;
mod distinct;
mod floor;
mod goroutines;
mod java;
mod kernel_cost;
mod overhead;
mod python;
mod startup;
mod symbolization;
mod syscalls;
mod targets;
mod tools;
mod unwinding;
mod wakers;

use self::{
    accuracy::accuracy,
    daemon_cost::daemon_cost,
    floor::floor_pairs,
    kernel_cost::program_costs,
    overhead::{Measured, cpu_configs, overhead, pingpong_configs, table},
    targets::{Measurements, goals, targets},
    tools::{ROUNDS, RUN_SECS, has},
    unwinding::WalkCosts,
};

/// One section alone (`--only`), printed to stdout: for working on what it
/// measures without the whole run.
pub fn run_only(section: &str) -> anyhow::Result<()> {
    print_report(|report| match section {
        "unwinding" => {
            unwinding::kernel_costs(report)?;
            unwinding::table_costs(report)
        }
        "goroutines" => goroutines::goroutine_view(report).map(drop),
        "python" => python::python_frames(report),
        "java" => java::java_frames(report),
        "containers" => containers::containers(report),
        "floor" => floor_pairs(report).map(drop),
        "syscalls" => syscalls::overhead_on_others(report).map(drop),
        "kernel" => program_costs(report).map(drop),
        "wakers" => wakers::wakers(report).map(drop),
        "processes" => brief::brief_processes(report).map(drop),
        "churn" => churn::churn(report).map(drop),
        "distinct" => distinct::distinct(report).map(drop),
        "daemon" => {
            daemon_cost(report)?;
            startup::startup(report).map(drop)
        }
        other => anyhow::bail!("no bench section {other}"),
    })
}

/// This tree's `sched_switch` against the one of the profiler binary
/// `other` (`--against`), printed to stdout: for changes to the hot path
/// smaller than what runs one after the other can tell apart.
pub fn run_against(other: &std::path::Path) -> anyhow::Result<()> {
    print_report(|report| against::against(other, report))
}

/// Builds what the bench runs, has `fill` write a report, and prints it
/// (writing no file).
fn print_report(fill: impl FnOnce(&mut String) -> anyhow::Result<()>) -> anyhow::Result<()> {
    install_tools()?;
    crate::workspace::build_release_with_fixtures()?;
    let mut report = String::new();
    fill(&mut report)?;
    print!("{report}");
    Ok(())
}

pub fn run() -> anyhow::Result<()> {
    install_tools()?;
    crate::workspace::build_release_with_fixtures()?;
    let mut report = String::new();
    header(&mut report)?;

    eprintln!("bench: context-switch overhead (pipe ping-pong)");
    let pingpong = overhead("pingpong", "round_trips_per_sec", &pingpong_configs())?;
    table(
        &mut report,
        "1. Context-switch-heavy overhead: pipe ping-pong on one CPU",
        "round trips/s",
        &pingpong,
    )?;
    eprintln!("bench: ping-pong at defaults over its floor, paired");
    let floor = floor_pairs(&mut report)?;

    eprintln!("bench: CPU-bound overhead");
    let cpu = overhead("cpu_bound", "loops_per_sec", &cpu_configs())?;
    table(&mut report, "2. CPU-bound overhead", "loops/s", &cpu)?;

    eprintln!("bench: per-program kernel cost");
    let switch_costs = program_costs(&mut report)?;

    eprintln!("bench: --wakers on the ping-pong");
    let wakers = wakers::wakers(&mut report)?;

    eprintln!("bench: daemon cost");
    let daemon = daemon_cost(&mut report)?;
    let startup_partial = startup::startup(&mut report)?;

    eprintln!("bench: accuracy against event budget");
    accuracy(&mut report)?;

    let later = later_sections(&mut report)?;

    targets(
        &mut report,
        &goals(&Measurements {
            floor: &floor,
            cpu: &cpu,
            syscalls: &later.syscalls,
            switch_costs,
            daemon: &daemon,
            startup_partial,
            goroutine_pingpong: later.goroutine_pingpong,
            walk: &later.walk,
            storm_percent: later.storm_percent,
            churn: &later.churn,
            distinct_rss: &later.distinct_rss,
            wakers: &wakers,
        }),
    )?;

    let path = workspace_root().join("BENCHMARKS.md");
    // The soak section comes from `cargo xtask soak`: keep it.
    if let Some(soak) = fs::read_to_string(&path)
        .ok()
        .as_deref()
        .and_then(crate::report::section)
    {
        report = crate::report::replace_section(&report, soak);
    }
    fs::write(&path, &report).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("bench: wrote {}", path.display());
    Ok(())
}

fn install_tools() -> anyhow::Result<()> {
    let missing: Vec<&str> = [
        ("go", "golang-go"),
        ("bpftool", "bpftool"),
        ("perf", "linux-perf"),
        ("offcputime", "libbpf-tools"),
        ("debuginfod", "debuginfod"),
    ]
    .into_iter()
    .filter(|(bin, _)| !has(bin))
    .map(|(_, package)| package)
    .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("bench: installing {}", missing.join(" "));
    crate::workspace::run(Command::new("apt-get").args(["update", "-qq"]))?;
    crate::workspace::run(
        Command::new("apt-get")
            .args(["install", "-y", "-qq"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}

fn header(report: &mut String) -> anyhow::Result<()> {
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")?
        .trim()
        .to_owned();
    let cpu = fs::read_to_string("/proc/cpuinfo")?
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let date = String::from_utf8(
        Command::new("date")
            .args(["-u", "+%Y-%m-%d %H:%M UTC"])
            .output()?
            .stdout,
    )?;
    writeln!(report, "# Benchmarks\n")?;
    writeln!(
        report,
        "Written by `cargo xtask bench` (xtask/src/bench/); do not edit by hand.\n"
    )?;
    writeln!(report, "- Date: {}", date.trim())?;
    writeln!(report, "- Machine: {cpus} CPUs, {cpu}; kernel {kernel}")?;
    writeln!(report, "- Command: `cargo xtask bench` (as root)")?;
    writeln!(
        report,
        "- Method: workloads are fixtures (profiler-fixtures) that time themselves for {RUN_SECS} s; \
         a tool runs for 2 s before its workload starts, so that it is measured in its steady \
         state, not while it starts; configurations are interleaved, {ROUNDS} rounds each, and \
         every run of a configuration follows a run without the profiler, its pair. These machines are shared and \
         noisy: read ratios, not absolute numbers. Slowdown = the median over the pairs of \
         baseline / configuration.\n"
    )?;
    Ok(())
}

/// What sections 6 to 16 measured for the goals.
struct Later {
    walk: WalkCosts,
    /// The system-call overhead runs.
    syscalls: Vec<Measured>,
    /// The goroutine ping-pong's slowdown at defaults.
    goroutine_pingpong: f64,
    /// The daemon's CPU in the fork/exec storm, percent of a core.
    storm_percent: f64,
    churn: churn::Churn,
    distinct_rss: distinct::DistinctRss,
}

/// Sections 6 to 16: the stack walk, the unwind tables, the cost to
/// processes not profiled, symbolization, brief processes, the goroutine
/// view, Python frames, Java frames, containers, a build host's churn and
/// its new binaries.
fn later_sections(report: &mut String) -> anyhow::Result<Later> {
    eprintln!("bench: stack walk cost, tables against frame pointers");
    let walk = unwinding::kernel_costs(report)?;
    eprintln!("bench: unwind table build time and size");
    unwinding::table_costs(report)?;
    eprintln!("bench: system-call overhead on a process that is not profiled");
    let syscalls = syscalls::overhead_on_others(report)?;
    eprintln!("bench: context-switch overhead on a process that is not profiled");
    syscalls::switches_of_others(report)?;
    eprintln!("bench: symbolization time per window");
    symbolization::symbolization(report)?;
    eprintln!("bench: processes that live milliseconds");
    let storm_percent = brief::brief_processes(report)?;
    eprintln!("bench: the goroutine view's cost");
    let goroutine_pingpong = goroutines::goroutine_view(report)?;
    eprintln!("bench: Python frames' cost");
    python::python_frames(report)?;
    eprintln!("bench: Java frames' cost");
    java::java_frames(report)?;
    eprintln!("bench: containers of short processes");
    containers::containers(report)?;
    eprintln!("bench: a build host's churn");
    let churn = churn::churn(report)?;
    eprintln!("bench: a build host's new binaries");
    let distinct_rss = distinct::distinct(report)?;

    Ok(Later {
        walk,
        syscalls,
        goroutine_pingpong,
        storm_percent,
        churn,
        distinct_rss,
    })
}

//! Section 3: kernel time per run of each program, from bpf_stats.
use std::{fmt::Write as _, fs, process::Command};

use anyhow::Context as _;

use super::{
    RUN_SECS,
    tools::{attach, go_and_wait, profiler, workload},
};

/// Average kernel time per run of each of the profiler's programs, from
/// the kernel's own accounting (kernel.bpf_stats_enabled). Returns the
/// time of all off-CPU programs per sched_switch run: what one context
/// switch costs, wakeups and system call exits included.
pub(super) fn program_costs(report: &mut String) -> anyhow::Result<f64> {
    writeln!(report, "## 3. Per-program kernel cost (bpf_stats)\n")?;
    writeln!(
        report,
        "run_time_ns / run_cnt per program, while the ping-pong runs under `profiler --all`.\n"
    )?;
    writeln!(report, "| program | runs | ns per run |")?;
    writeln!(report, "| --- | --- | --- |")?;
    let mut workload = workload("pingpong", &[RUN_SECS])?;
    let attached = attach(&profiler("", &["--all"]), workload.pid())?.context("profiler")?;
    fs::write("/proc/sys/kernel/bpf_stats_enabled", "1")?;
    let before = bpf_stats()?;
    go_and_wait(&mut workload)?;
    let after = bpf_stats()?;
    fs::write("/proc/sys/kernel/bpf_stats_enabled", "0")?;
    attached.stop()?;
    let (mut switches, mut tracing_ns) = (0, 0);
    for (name, (runs, ns)) in &after {
        let (runs0, ns0) = before
            .iter()
            .find(|(n, _)| n == name)
            .map_or((0, 0), |(_, v)| *v);
        let (runs, ns) = (runs - runs0, ns - ns0);
        #[expect(clippy::cast_precision_loss, reason = "an average")]
        let per_run = if runs == 0 {
            0.0
        } else {
            ns as f64 / runs as f64
        };
        writeln!(report, "| {name} | {runs} | {per_run:.0} |")?;
        if name == "sched_switch" {
            switches = runs;
        }
        if name != "on_cpu_sample" {
            tracing_ns += ns;
        }
    }
    #[expect(clippy::cast_precision_loss, reason = "an average")]
    let per_switch = tracing_ns as f64 / switches.max(1) as f64;
    writeln!(
        report,
        "\nAll off-CPU programs together: {per_switch:.0} ns per context switch.\n"
    )?;
    Ok(per_switch)
}

/// The profiler's programs, by their (kernel-truncated) names.
pub(super) const PROGRAMS: [&str; 6] = [
    "on_cpu_sample",
    "sched_switch",
    "sched_wakeup",
    "rseq_update",
    "sys_exit",
    "sched_process_e",
];

/// (name, (run_cnt, run_time_ns)) of the profiler's programs. Only one
/// profiler runs during the measurement, so names identify them.
pub(super) fn bpf_stats() -> anyhow::Result<Vec<(String, (u64, u64))>> {
    let out = Command::new("bpftool")
        .args(["prog", "show"])
        .output()
        .context("bpftool")?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "709: tracing  name sched_switch  tag ...  gpl run_time_ns 1883250 run_cnt 155"
    let mut stats = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let after = |key: &str| {
            words
                .iter()
                .position(|w| *w == key)
                .and_then(|i| words.get(i + 1))
        };
        let (Some(name), Some(ns), Some(runs)) =
            (after("name"), after("run_time_ns"), after("run_cnt"))
        else {
            continue;
        };
        if PROGRAMS.contains(name) {
            stats.push((
                (*name).to_owned(),
                (runs.parse().unwrap_or(0), ns.parse().unwrap_or(0)),
            ));
        }
    }
    stats.sort();
    Ok(stats)
}

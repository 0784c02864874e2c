//! Section 10: processes that live milliseconds. What following every
//! exec and executable mmap through the kernel's records (`--all`,
//! `--comm`) costs each exec, and the daemon's cost under a fork/exec
//! storm: a thousand short processes a second for 10 s.
use std::{
    fmt::Write as _,
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{
    daemon_metrics::Metrics,
    overhead::{Measured, field, median, overhead, table},
    syscalls::Idle,
    tools::{Config, attach, baseline, profiler, workload},
};
use crate::procfs::{cpu_ticks, status_field};

/// The storm: this many `/bin/true` a second, for this long.
const STORM_RATE: u32 = 1000;
const STORM_SECS: u64 = 10;

/// Writes section 10.
/// Returns the storm's daemon CPU, percent of a core.
pub(super) fn brief_processes(report: &mut String) -> anyhow::Result<f64> {
    exec_cost(report)?;
    storm(report)
}

/// The three configurations: no profiler, and a profiler with the records
/// off and on, profiling nothing in either.
fn configs(idle: &Idle) -> Vec<Config> {
    vec![
        baseline(),
        profiler(
            "profiler --pid of an idle process (no mmap records)",
            &["--pid", &idle.pid()],
        ),
        profiler(
            "profiler --comm of a name that never runs --wait (mmap records on)",
            &["--comm", "no-such-program", "--wait"],
        ),
    ]
}

/// The kernel's cost of the records: per executable mmap (`mmap_loop`,
/// precise), and per whole short process (`exec_loop`, noisy), with the
/// records on and off and nothing profiled.
fn exec_cost(report: &mut String) -> anyhow::Result<()> {
    let idle = Idle::start()?;
    let mmaps = overhead("mmap_loop", "mmaps_per_sec", &configs(&idle))?;
    let execs = overhead("exec_loop", "execs_per_sec", &configs(&idle))?;
    drop(idle);
    table(
        report,
        "10. Processes that live milliseconds: the mmap records' cost per executable mmap (`mmap_loop`: its own binary mapped PROT_EXEC and unmapped)",
        "mmap+munmap per s",
        &mmaps,
    )?;
    // Cost per operation: the paired slowdown over the records-off row,
    // times the time per operation there.
    let cost_us = |results: &[Measured]| {
        let off = results[1].slowdown();
        let on = results[2].slowdown();
        (on - off) * 1e6 / median(&results[0].rates)
    };
    writeln!(
        report,
        "The records cost {:.2} µs per executable mmap (the record, with the build id read from the file's first page), from the paired slowdowns over the records-off row.\n",
        cost_us(&mmaps)
    )?;
    table(
        report,
        "10b. Per short process (`exec_loop`: fork, exec and exit of /bin/true)",
        "processes per s",
        &execs,
    )?;
    writeln!(
        report,
        "Per process ({:.0} µs each without a profiler here): {:+.1} µs with the records \
         on (a fork, an exec, an exit and about four executable mmaps), against the spread \
         of this loop's runs (min .. max above).\n",
        1e6 / median(&execs[0].rates),
        cost_us(&execs)
    )?;
    Ok(())
}

/// The daemon under `--all` while `exec_loop` runs `STORM_RATE` processes
/// a second: its CPU and peak memory, whether it kept up (records lost,
/// images dropped) and what it took in.
fn storm(report: &mut String) -> anyhow::Result<f64> {
    let seconds = STORM_SECS.to_string();
    let rate = STORM_RATE.to_string();
    let mut storm = workload("exec_loop", &[&seconds, &rate])?;
    let metrics = Metrics::new()?;
    let mut args = vec!["--all", "--interval", "5s"];
    args.extend(metrics.args());
    let config = profiler("", &args);
    let attached = attach(&config, storm.pid())?.context("profiler")?;
    let pid = attached.child.id();
    // The storm hits a daemon past its cold start, as on a host whose
    // daemon runs for weeks; the start is reported beside.
    metrics.wait_first_window()?;
    let ticks0 = cpu_ticks(pid)?;
    #[expect(clippy::cast_precision_loss, reason = "milliseconds")]
    let start_ms = ticks0 as f64 * 10.0;
    let started = Instant::now();
    storm.go()?;
    let line = storm.result_line()?;
    // The last window's end, so every image is counted.
    sleep(Duration::from_secs(6));
    let ticks = cpu_ticks(pid)? - ticks0;
    let elapsed = started.elapsed().as_secs_f64();
    let hwm_kb = status_field(pid, "VmHWM")?;
    let scrape = metrics.scrape()?;
    attached.stop()?;
    let achieved = field(&line, "execs_per_sec").context("exec_loop's rate")?;
    #[expect(clippy::cast_precision_loss, reason = "a percentage")]
    let cpu_pct = ticks as f64 / 100.0 / elapsed * 100.0;
    #[expect(clippy::cast_precision_loss, reason = "megabytes")]
    let rss_mb = hwm_kb as f64 / 1024.0;
    writeln!(report, "## 10c. A fork/exec storm\n")?;
    writeln!(
        report,
        "The storm: `exec_loop {STORM_SECS} {STORM_RATE}` ({achieved:.0} processes a second \
         reached) under `profiler --all --interval 5s`, started once the daemon has written its \
         first window, measured over {elapsed:.0} s. The daemon's start to that window (its \
         load, the host's processes' tables, `/proc/kallsyms`) took {start_ms:.0} ms of its CPU.\n"
    )?;
    writeln!(
        report,
        "| daemon CPU (% of one core) | peak RSS (MB) | images ended | images used (sampled) | images dropped | records lost |"
    )?;
    writeln!(report, "| --- | --- | --- | --- | --- | --- |")?;
    writeln!(
        report,
        "| {cpu_pct:.2} | {rss_mb:.1} | {:.0} | {:.0} | {:.0} | {:.0} |\n",
        scrape.counter("process_images_ended")?,
        scrape.counter("process_images_recorded")?,
        scrape.counter("process_images_dropped")?,
        scrape.counter("mapping_records_lost")?,
    )?;
    Ok(cpu_pct)
}

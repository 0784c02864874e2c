//! Section 15: a build host's churn. The daemon under `--all` while a
//! shell loop starts real programs (xz, gofmt of a Go source file,
//! python3, `sh -c 'ls | wc -l'`), and while `make -j2` builds a
//! generated C project with the machine's gcc: its CPU per new process,
//! broken down by step from its own counters
//! (`profiler_cpu_seconds_total{step}`), and the build's wall time with
//! and without it.
use std::{
    fmt::Write as _,
    fs,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use super::{
    daemon_metrics::{Metrics, Scrape},
    overhead::median,
    tools::{attach, profiler},
};
use crate::procfs::{cpu_ticks, reset_peak_rss, status_field};

mod first_window;

use first_window::{Window, first_window, windows};

/// How long the shell loop runs (measured), how long it runs before (the
/// daemon's first programs and first window: its cold start), and the
/// builds each way (alternated).
const LOOP_SECS: u64 = 20;
const WARM_SECS: u64 = 6;
const BUILDS: usize = 3;
/// Source files of the generated project.
const SOURCES: usize = 120;

/// The daemon's steps, as `/metrics` names them (`cpu_time.rs`).
const STEPS: [&str; 12] = [
    "maps_read",
    "binary_ids",
    "unwind_tables",
    "mappings_publish",
    "runtimes_publish",
    "snapshots",
    "exits",
    "mmap_records",
    "runtime_reads",
    "symbolize",
    "requests",
    "drain",
];

/// One churn under the daemon: how many processes started, over how
/// long, the daemon's CPU (seconds) in all and by step, its peak RSS (a
/// cold run's since the daemon's start, a warm run's over the run).
struct Run {
    processes: u64,
    secs: f64,
    cpu_s: f64,
    steps: Vec<f64>,
    hwm_mb: f64,
}

/// What section 15 measured, for the goals.
pub(super) struct Churn {
    /// µs of daemon CPU per process of the shell loop.
    pub(super) shell_us: f64,
    /// The daemon's CPU during the builds, percent of a core.
    pub(super) build_daemon_percent: f64,
    /// The build's wall time with the daemon over without (medians).
    pub(super) build_slowdown: f64,
    /// The shell loop's first window's share of user frames unnamed over
    /// the later windows' mean share.
    pub(super) first_window_unnamed: f64,
    /// The daemon's peak RSS from its start through the cold shell loop
    /// and its first window, over its peak in the loop after.
    pub(super) cold_peak_rss: f64,
}

/// Writes section 15.
pub(super) fn churn(report: &mut String) -> anyhow::Result<Churn> {
    writeln!(
        report,
        "## 15. A build host's churn: daemon CPU per new process\n"
    )?;
    let (shell_cold, shell, windows) = shell_loop()?;
    let (build_cold, build, walls) = builds()?;
    writeln!(
        report,
        "Under `profiler --all --interval 5s`: a shell loop starting real programs for \
         {LOOP_SECS} s (`head -c 20000 /dev/urandom | xz`, `gofmt` of Go's `net/http/server.go` \
         (114 KB: 10 ms), Debian's `python3 -c pass`, \
         `sh -c 'ls /usr/bin | wc -l'`, and `date` for its clock), and `make -j2` of a \
         generated C project ({SOURCES} files, gcc -O2), {BUILDS} builds with the daemon \
         and {BUILDS} without, alternated. Each churn is measured on a daemon that has run \
         it before and written its first window (a build host's daemon runs for weeks): \
         the loop after {WARM_SECS} s of it, each build after another, from a window's end \
         (SIGHUP) to the end of the window that holds its samples (their symbolization \
         counted); the cold rows are those first runs, from the daemon's start (its first \
         tables, `/proc/kallsyms`) to 0.5 s after. \
         Processes counted from `/proc/stat`'s forks; \
         the daemon's CPU from its `/proc/PID/stat`, by step from its \
         `profiler_cpu_seconds_total{{step}}` (the rest: the daemon's loop and wake-ups, HTTP); \
         its peak RSS (`VmHWM`) in a cold row since its start, in the others over that run \
         alone (reset before it through `clear_refs`).\n"
    )?;
    writeln!(
        report,
        "| churn | processes/s | daemon CPU (% of a core) | µs of daemon CPU per process | peak RSS (MB) |"
    )?;
    writeln!(report, "| --- | --- | --- | --- | --- |")?;
    let runs = [
        ("shell loop", &shell),
        ("make -j2", &build),
        ("shell loop, cold", &shell_cold),
        ("make -j2, cold", &build_cold),
    ];
    for (name, run) in runs {
        #[expect(clippy::cast_precision_loss, reason = "rates")]
        let per_s = run.processes as f64 / run.secs;
        writeln!(
            report,
            "| {name} | {per_s:.0} | {:.2} | {:.0} | {:.1} |",
            run.cpu_s / run.secs * 100.0,
            per_process_us(run, run.cpu_s),
            run.hwm_mb
        )?;
    }
    writeln!(report, "\nBy step, µs of daemon CPU per process:\n")?;
    writeln!(
        report,
        "| step | shell loop | make -j2 | shell loop, cold | make -j2, cold |"
    )?;
    writeln!(report, "| --- | --- | --- | --- | --- |")?;
    for (i, step) in STEPS.iter().enumerate() {
        let cells: Vec<String> = runs
            .iter()
            .map(|(_, run)| format!("{:.1}", per_process_us(run, run.steps[i])))
            .collect();
        writeln!(report, "| `{step}` | {} |", cells.join(" | "))?;
    }
    let rest = |run: &Run| per_process_us(run, run.cpu_s - run.steps.iter().sum::<f64>());
    let cells: Vec<String> = runs
        .iter()
        .map(|(_, run)| format!("{:.1}", rest(run)))
        .collect();
    writeln!(report, "| the rest | {} |\n", cells.join(" | "))?;
    let (without, with, cold) = (median(&walls.0), median(&walls.1), median(&walls.2));
    writeln!(
        report,
        "The build's wall time: {without:.2} s without the daemon, {with:.2} s with it \
         (medians of {BUILDS}): {:+.1}%; the daemon's first build {cold:.2} s ({:+.1}%).\n",
        (with / without - 1.0) * 100.0,
        (cold / without - 1.0) * 100.0
    )?;
    let first_window_unnamed = first_window(report, &windows)?;
    Ok(Churn {
        first_window_unnamed,
        cold_peak_rss: shell_cold.hwm_mb / shell.hwm_mb,
        shell_us: per_process_us(&shell, shell.cpu_s),
        build_daemon_percent: build.cpu_s / build.secs * 100.0,
        build_slowdown: with / without,
    })
}

fn per_process_us(run: &Run, cpu_s: f64) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a ratio")]
    let processes = run.processes.max(1) as f64;
    cpu_s * 1e6 / processes
}

/// The shell loop under the daemon: its first seconds (cold), then
/// [`LOOP_SECS`] of it measured.
fn shell_loop() -> anyhow::Result<(Run, Run, Vec<Window>)> {
    let (cold, warm, log) = under_daemon(|| run_loop(WARM_SECS), || run_loop(LOOP_SECS))?;
    Ok((cold, warm, windows(&log)))
}

/// Starts real programs for `secs` seconds.
fn run_loop(secs: u64) -> anyhow::Result<()> {
    let script = format!(
        "py=/usr/bin/python3; [ -x $py ] || py=python3
         go_file=$(go env GOROOT 2>/dev/null)/src/net/http/server.go
         [ -f \"$go_file\" ] || go_file=/dev/null
         end=$(($(date +%s) + {secs}))
         while [ \"$(date +%s)\" -lt \"$end\" ]; do
           head -c 20000 /dev/urandom | xz -c > /dev/null
           command -v gofmt > /dev/null && gofmt \"$go_file\" > /dev/null
           $py -c pass
           sh -c 'ls /usr/bin | wc -l' > /dev/null
         done"
    );
    let status = Command::new("sh").arg("-c").arg(&script).status()?;
    if !status.success() {
        bail!("the shell loop: {status}");
    }
    Ok(())
}

/// The build's wall times in seconds: without the daemon, with it, and
/// the daemon's first.
type Walls = (Vec<f64>, Vec<f64>, Vec<f64>);

/// `make -j2` of the generated project, `BUILDS` times without the daemon
/// and, alternated, `BUILDS` times two builds with a daemon started for
/// them: the builds (cold, then measured) as one run each, and the wall
/// times.
fn builds() -> anyhow::Result<(Run, Run, Walls)> {
    let dir = tempfile::tempdir()?;
    generate_project(dir.path())?;
    let mut walls: Walls = (Vec::new(), Vec::new(), Vec::new());
    let (mut colds, mut warms) = (Vec::new(), Vec::new());
    for _ in 0..BUILDS {
        walls.0.push(build(dir.path())?);
        let (mut cold, mut warm) = (0.0, 0.0);
        let (cold_run, warm_run, _) = under_daemon(
            || {
                cold = build(dir.path())?;
                Ok(())
            },
            || {
                warm = build(dir.path())?;
                Ok(())
            },
        )?;
        walls.1.push(warm);
        walls.2.push(cold);
        colds.push(cold_run);
        warms.push(warm_run);
    }
    Ok((Run::sum(&colds), Run::sum(&warms), walls))
}

impl Run {
    /// The runs as one.
    fn sum(runs: &[Run]) -> Run {
        Run {
            processes: runs.iter().map(|r| r.processes).sum(),
            secs: runs.iter().map(|r| r.secs).sum(),
            cpu_s: runs.iter().map(|r| r.cpu_s).sum(),
            steps: (0..STEPS.len())
                .map(|i| runs.iter().map(|r| r.steps[i]).sum())
                .collect(),
            hwm_mb: runs.iter().map(|r| r.hwm_mb).fold(0.0, f64::max),
        }
    }
}

/// A clean `make -j2` in `dir`; its wall time in seconds.
fn build(dir: &Path) -> anyhow::Result<f64> {
    let clean = Command::new("make")
        .args(["-s", "clean"])
        .current_dir(dir)
        .status()?;
    if !clean.success() {
        bail!("make clean: {clean}");
    }
    let started = Instant::now();
    let status = Command::new("make")
        .args(["-s", "-j2"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .context("make (apt-get install make gcc)")?;
    if !status.success() {
        bail!("make -j2: {status}");
    }
    Ok(started.elapsed().as_secs_f64())
}

/// `SOURCES` C files of a few functions each, a `main.c` that calls them,
/// and a Makefile that builds each object and links them.
fn generate_project(dir: &Path) -> anyhow::Result<()> {
    let mut main = String::from("#include <stdio.h>\n");
    let mut calls = String::new();
    for i in 0..SOURCES {
        let mut source = String::new();
        for f in 0..8 {
            writeln!(
                source,
                "static unsigned long step{f}(unsigned long x) {{ for (int i = 0; i < {n}; i++) \
                 x = x * 6364136223846793005ul + {f}ul + (x >> {s}); return x; }}",
                n = 10 + f,
                s = 1 + f % 7
            )?;
        }
        writeln!(
            source,
            "unsigned long unit{i}(unsigned long x) {{ return step0(step1(step2(step3(\
             step4(step5(step6(step7(x)))))))); }}"
        )?;
        fs::write(dir.join(format!("unit{i}.c")), source)?;
        writeln!(main, "unsigned long unit{i}(unsigned long);")?;
        writeln!(calls, "    x = unit{i}(x);")?;
    }
    writeln!(
        main,
        "int main(void) {{\n    unsigned long x = 1;\n{calls}    printf(\"%lu\\n\", x);\n    return 0;\n}}"
    )?;
    fs::write(dir.join("main.c"), main)?;
    fs::write(
        dir.join("Makefile"),
        "OBJS = $(patsubst %.c,%.o,$(wildcard *.c))\n\
         prog: $(OBJS)\n\tgcc -o $@ $^\n\
         %.o: %.c\n\tgcc -O2 -c $< -o $@\n\
         clean:\n\trm -f *.o prog\n",
    )?;
    Ok(())
}

/// Runs `cold` with a daemon just started under `--all`, waits for its
/// first window to be written, then runs `churn`: what the daemon spent
/// on each (its CPU over it, the steps' deltas), and its log.
fn under_daemon(
    cold: impl FnOnce() -> anyhow::Result<()>,
    churn: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<(Run, Run, String)> {
    let metrics = Metrics::new()?;
    let mut args = vec!["--all", "--interval", "5s"];
    args.extend(metrics.args());
    let config = profiler("", &args);
    let attached = attach(&config, 0)?.context("profiler")?;
    let pid = attached.child.id();
    // Started, and its first look at every process done.
    std::thread::sleep(Duration::from_secs(2));
    // What the cold run left to the daemon: its last processes' reads.
    let settle = || {
        std::thread::sleep(Duration::from_millis(500));
        Ok(())
    };
    let first = measured(pid, &metrics, cold, settle)?;
    metrics.wait_first_window()?;
    // The churn is measured from a window's end to the end of the window
    // that holds its samples: its windows' symbolization counted, and
    // none of the cold run's (a window's end at 5 s intervals fell
    // within a build or not, by a few tenths of a second).
    metrics.end_window(pid)?;
    // The cold run's peak is the start's and the first windows'; the
    // churn's, its own.
    reset_peak_rss(pid)?;
    let steady = measured(pid, &metrics, churn, || metrics.end_window(pid))?;
    let log = attached.stop()?;
    Ok((first, steady, log))
}

/// Runs `churn`, then `settle` (what it left to the daemon), and what
/// daemon `pid` spent on both; the run's seconds are the churn's.
fn measured(
    pid: u32,
    metrics: &Metrics,
    churn: impl FnOnce() -> anyhow::Result<()>,
    settle: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<Run> {
    let (before, ticks0, forks0) = (steps(&metrics.scrape()?)?, cpu_ticks(pid)?, forks()?);
    let started = Instant::now();
    churn()?;
    let secs = started.elapsed().as_secs_f64();
    let processes = forks()? - forks0;
    settle()?;
    let ticks = cpu_ticks(pid)? - ticks0;
    let after = steps(&metrics.scrape()?)?;
    let hwm_kb = status_field(pid, "VmHWM")?;
    #[expect(clippy::cast_precision_loss, reason = "seconds and megabytes")]
    Ok(Run {
        processes,
        secs,
        cpu_s: ticks as f64 / 100.0,
        steps: after.iter().zip(&before).map(|(a, b)| a - b).collect(),
        hwm_mb: hwm_kb as f64 / 1024.0,
    })
}

/// Each step's CPU seconds so far, in `STEPS` order.
fn steps(scrape: &Scrape) -> anyhow::Result<Vec<f64>> {
    STEPS.iter().map(|step| scrape.cpu_seconds(step)).collect()
}

/// Processes (and threads) started since boot (`/proc/stat`).
fn forks() -> anyhow::Result<u64> {
    let stat = fs::read_to_string("/proc/stat")?;
    stat.lines()
        .find_map(|l| l.strip_prefix("processes ")?.trim().parse().ok())
        .context("no processes line in /proc/stat")
}

//! Section 15: a build host's churn. The daemon under `--all` while a
//! shell loop starts real programs (xz, gofmt, python3, `sh -c 'ls | wc
//! -l'`), and while `make -j2` builds a generated C project with the
//! machine's gcc: its CPU per new process, broken down by step from its
//! own counters (`profiler_cpu_seconds_total{step}`), and the build's wall
//! time with and without it.
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
use crate::procfs::{cpu_ticks, status_field};

/// How long the shell loop runs, and the builds each way (alternated).
const LOOP_SECS: u64 = 20;
const BUILDS: usize = 3;
/// Source files of the generated project.
const SOURCES: usize = 120;

/// The daemon's steps, as `/metrics` names them (`cpu_time.rs`).
const STEPS: [&str; 10] = [
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
];

/// One churn under the daemon: how many processes started, over how
/// long, the daemon's CPU (seconds) in all and by step, its peak RSS.
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
}

/// Writes section 15.
pub(super) fn churn(report: &mut String) -> anyhow::Result<Churn> {
    writeln!(
        report,
        "## 15. A build host's churn: daemon CPU per new process\n"
    )?;
    let shell = shell_loop()?;
    let (build, walls) = builds()?;
    writeln!(
        report,
        "Under `profiler --all --interval 5s`: a shell loop starting real programs for \
         {LOOP_SECS} s (`head -c 20000 /dev/urandom | xz`, `gofmt`, Debian's `python3 -c pass`, \
         `sh -c 'ls /usr/bin | wc -l'`, and `date` for its clock), and `make -j2` of a \
         generated C project ({SOURCES} files, gcc -O2), {BUILDS} builds with the daemon \
         and {BUILDS} without, alternated. Processes counted from `/proc/stat`'s forks; \
         the daemon's CPU from its `/proc/PID/stat`, by step from its \
         `profiler_cpu_seconds_total{{step}}` (the rest: draining, the window loop, HTTP).\n"
    )?;
    writeln!(
        report,
        "| churn | processes/s | daemon CPU (% of a core) | µs of daemon CPU per process | peak RSS (MB) |"
    )?;
    writeln!(report, "| --- | --- | --- | --- | --- |")?;
    for (name, run) in [("shell loop", &shell), ("make -j2", &build)] {
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
    writeln!(report, "| step | shell loop | make -j2 |")?;
    writeln!(report, "| --- | --- | --- |")?;
    for (i, step) in STEPS.iter().enumerate() {
        writeln!(
            report,
            "| `{step}` | {:.1} | {:.1} |",
            per_process_us(&shell, shell.steps[i]),
            per_process_us(&build, build.steps[i])
        )?;
    }
    let rest = |run: &Run| per_process_us(run, run.cpu_s - run.steps.iter().sum::<f64>());
    writeln!(
        report,
        "| the rest | {:.1} | {:.1} |\n",
        rest(&shell),
        rest(&build)
    )?;
    let (without, with) = (median(&walls.0), median(&walls.1));
    writeln!(
        report,
        "The build's wall time: {without:.2} s without the daemon, {with:.2} s with it \
         (medians of {BUILDS}): {:+.1}%.\n",
        (with / without - 1.0) * 100.0
    )?;
    Ok(Churn {
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

/// The shell loop under the daemon.
fn shell_loop() -> anyhow::Result<Run> {
    let script = format!(
        "py=/usr/bin/python3; [ -x $py ] || py=python3
         end=$(($(date +%s) + {LOOP_SECS}))
         while [ \"$(date +%s)\" -lt \"$end\" ]; do
           head -c 20000 /dev/urandom | xz -c > /dev/null
           command -v gofmt > /dev/null && echo 'package p' | gofmt > /dev/null
           $py -c pass
           sh -c 'ls /usr/bin | wc -l' > /dev/null
         done"
    );
    under_daemon(|| {
        let status = Command::new("sh").arg("-c").arg(&script).status()?;
        if !status.success() {
            bail!("the shell loop: {status}");
        }
        Ok(())
    })
}

/// The build's wall times in seconds, without the daemon and with it.
type Walls = (Vec<f64>, Vec<f64>);

/// `make -j2` of the generated project, `BUILDS` times each way
/// (alternated): the builds with the daemon as one run, and the wall
/// times.
fn builds() -> anyhow::Result<(Run, Walls)> {
    let dir = tempfile::tempdir()?;
    generate_project(dir.path())?;
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let mut runs = Vec::new();
    for _ in 0..BUILDS {
        without.push(build(dir.path())?);
        let mut wall = 0.0;
        runs.push(under_daemon(|| {
            wall = build(dir.path())?;
            Ok(())
        })?);
        with.push(wall);
    }
    let run = Run {
        processes: runs.iter().map(|r| r.processes).sum(),
        secs: runs.iter().map(|r| r.secs).sum(),
        cpu_s: runs.iter().map(|r| r.cpu_s).sum(),
        steps: (0..STEPS.len())
            .map(|i| runs.iter().map(|r| r.steps[i]).sum())
            .collect(),
        hwm_mb: runs.iter().map(|r| r.hwm_mb).fold(0.0, f64::max),
    };
    Ok((run, (without, with)))
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

/// Runs `churn` with the daemon under `--all`, and what the daemon
/// spent on it: its CPU over the churn, and the steps' deltas.
fn under_daemon(churn: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<Run> {
    let metrics = Metrics::new()?;
    let mut args = vec!["--all", "--interval", "5s"];
    args.extend(metrics.args());
    let config = profiler("", &args);
    let attached = attach(&config, 0)?.context("profiler")?;
    let pid = attached.child.id();
    // Started, and its first look at every process done.
    std::thread::sleep(Duration::from_secs(2));
    let (before, ticks0, forks0) = (steps(&metrics.scrape()?)?, cpu_ticks(pid)?, forks()?);
    let started = Instant::now();
    churn()?;
    let secs = started.elapsed().as_secs_f64();
    let processes = forks()? - forks0;
    // What the churn left to the daemon (its last processes' reads).
    std::thread::sleep(Duration::from_millis(500));
    let ticks = cpu_ticks(pid)? - ticks0;
    let after = steps(&metrics.scrape()?)?;
    let hwm_kb = status_field(pid, "VmHWM")?;
    attached.stop()?;
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

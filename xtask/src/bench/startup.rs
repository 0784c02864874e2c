//! Section 4's start-up row: how much of a process started just after the
//! daemon is walked in full. `late.c` (plain `cc -O2`, no frame pointers)
//! starts 100 ms after `profiler --all` says it is profiling, loads a
//! library with `dlopen` and spins in its frameless leaf `lib_spin`; a
//! sample has a full stack when it goes on through `main` into libc's
//! start code, which it can only with both binaries' tables published.
use std::{
    fmt::Write as _,
    fs,
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    thread::sleep,
    time::Duration,
};

use anyhow::Context as _;
use profiler_fixtures::client::Fixture;

use super::tools::{SCRATCH_DIR, release};
use crate::workspace::workspace_root;

/// How long after the daemon is ready the program starts.
const AFTER_READY: Duration = Duration::from_millis(100);
/// Runs, each with a new daemon.
const RUNS: usize = 3;

/// Writes the row; returns the share of samples without a full stack, in
/// percent, over all runs.
pub(super) fn startup(report: &mut String) -> anyhow::Result<f64> {
    let (program, library) = build()?;
    let (mut spin, mut full) = (0, 0);
    let mut runs = Vec::new();
    for run in 0..RUNS {
        let out = Path::new(SCRATCH_DIR).join(format!("startup-{run}"));
        let _ = fs::remove_dir_all(&out);
        let (s, f) = one_run(&program, &library, &out)?;
        anyhow::ensure!(s > 0, "no samples in lib_spin in run {run}");
        runs.push(format!("{:.1}", pct(f, s)));
        spin += s;
        full += f;
    }
    writeln!(
        report,
        "\nStart-up under `--all`: `late.c` (`cc -O2`) started {} ms after the daemon said it was profiling (no other wait), spinning 2 s in `lib_spin` of a library it loads with `dlopen`, at 499 Hz; of its samples in `lib_spin` (read by `go tool pprof -traces`), those whose stack goes on through `main` into libc's start code, in {RUNS} runs: {} % ({full} of {spin}).\n",
        AFTER_READY.as_millis(),
        runs.join(", ")
    )?;
    Ok(100.0 - pct(full, spin))
}

#[expect(clippy::cast_precision_loss, reason = "sample counts")]
fn pct(part: u64, whole: u64) -> f64 {
    part as f64 / whole as f64 * 100.0
}

/// `late` and `late_lib.so`, built with plain `cc -O2`.
fn build() -> anyhow::Result<(PathBuf, PathBuf)> {
    let dir = Path::new(SCRATCH_DIR);
    fs::create_dir_all(dir)?;
    let sources = workspace_root().join("profiler-fixtures/c");
    let (program, library) = (dir.join("late"), dir.join("late_lib.so"));
    crate::workspace::run(
        Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&program)
            .arg(sources.join("late.c"))
            .arg("-ldl"),
    )?;
    crate::workspace::run(
        Command::new("cc")
            .args(["-O2", "-shared", "-fPIC", "-o"])
            .arg(&library)
            .arg(sources.join("late_lib.c")),
    )?;
    Ok((program, library))
}

/// One daemon, one program: its samples in `lib_spin`, and those with a
/// full stack.
fn one_run(program: &Path, library: &Path, out: &Path) -> anyhow::Result<(u64, u64)> {
    let mut daemon = Command::new(release("profiler"))
        .args(["--all", "--frequency", "499", "--interval", "60s"])
        .arg("--output-dir")
        .arg(out)
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the profiler")?;
    let stderr = daemon.stderr.take().context("profiler stderr")?;
    let (ready, is_ready) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("profiling") {
                let _ = ready.send(());
            }
        }
    });
    let started = is_ready.recv_timeout(Duration::from_secs(30));
    let measured = started
        .context("the profiler did not start")
        .and_then(|()| {
            sleep(AFTER_READY);
            let mut command = Command::new(program);
            command.arg("2").arg(library);
            let mut fixture = Fixture::spawn(command).context("starting late")?;
            fixture.go()?;
            fixture.result_line()?;
            Ok(fixture.pid())
        });
    crate::workspace::interrupt(daemon.id())?;
    daemon.wait()?;
    let pid = measured?;
    let mut counts = (0, 0);
    for entry in fs::read_dir(out)? {
        let (spin, full) = full_stacks(&entry?.path(), pid)?;
        counts = (counts.0 + spin, counts.1 + full);
    }
    Ok(counts)
}

/// Of `pid`'s samples in `profile`, those in `lib_spin` and those of them
/// with a full stack, as `go tool pprof -traces` prints them.
fn full_stacks(profile: &Path, pid: u32) -> anyhow::Result<(u64, u64)> {
    let output = Command::new("go")
        .args(["tool", "pprof", "-traces", "-sample_index=samples"])
        .arg(profile)
        .output()
        .context("running go tool pprof")?;
    anyhow::ensure!(output.status.success(), "go tool pprof: {output:?}");
    let text = String::from_utf8(output.stdout)?;
    let (mut spin, mut full) = (0, 0);
    let pid_label = format!("pid:  {pid}");
    for trace in text.split("-----------+-") {
        if !trace.lines().any(|l| l.trim() == pid_label) {
            continue;
        }
        // Labels are "name:  value", the rest of the separator is dashes;
        // the first frame line starts with the sample's count.
        let mut frames = trace.lines().filter(|l| {
            let l = l.trim();
            !l.is_empty() && !l.starts_with('-') && !l.contains(":  ")
        });
        let Some(first) = frames.next() else { continue };
        let mut words = first.split_whitespace();
        let count: u64 = words.next().unwrap_or_default().parse().unwrap_or(0);
        let names: Vec<&str> = words
            .chain(frames.flat_map(str::split_whitespace))
            .collect();
        if names.contains(&"lib_spin") {
            spin += count;
            if names.iter().any(|n| n.starts_with("__libc_start")) {
                full += count;
            }
        }
    }
    Ok((spin, full))
}

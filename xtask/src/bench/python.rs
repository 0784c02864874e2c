//! Section 12: what Python frames cost. The kernel time of an on-CPU
//! sample of a Python program ten Python frames deep against a C
//! program's of about ten native frames, in one run; and the daemon's CPU
//! with 20 Python processes under `--all`, next to py-spy's sampling one
//! of them at the same rate.
use std::{
    fmt::Write as _,
    process::{Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use profiler_fixtures::client::Fixture;

use super::{
    tools::{RUN_SECS, attach, profiler},
    unwinding::{deep_stack, walk_cost_with_runtime},
};
use crate::{procfs::cpu_ticks, workspace::workspace_root};

/// Debian's interpreter, the one the bench runs.
const PYTHON: &str = "/usr/bin/python3.11";
/// Python frames of the deep program.
const DEPTH: &str = "10";
/// Python processes under `--all`.
const PROCESSES: usize = 20;
const SECONDS: u64 = 15;

/// `deep.py` for `seconds`, `DEPTH` Python frames deep.
fn deep_python(seconds: &str) -> Command {
    let mut command = Command::new(PYTHON);
    command
        .arg(workspace_root().join("profiler-fixtures/python/deep.py"))
        .args([seconds, DEPTH]);
    command
}

pub(super) fn python_frames(report: &mut String) -> anyhow::Result<()> {
    writeln!(report, "## 12. Python frames\n")?;
    writeln!(
        report,
        "`on_cpu_sample`'s run_time_ns / run_cnt (bpf_stats) at 999 Hz (`--no-off-cpu`): Debian's python3.11 running `profiler-fixtures/python/deep.py` {DEPTH} Python frames deep, and `deep.c` (plain `cc -O2`) about ten native frames deep, one after the other, one copy per CPU (as section 6). Frames per sample from the daemon's counters.\n"
    )?;
    writeln!(
        report,
        "| program | on_cpu_sample ns | native frames | Python frames |"
    )?;
    writeln!(report, "| --- | --- | --- | --- |")?;
    let args = ["--no-off-cpu", "--frequency", "999"];
    let ns_of = |stats: &[(String, f64)]| {
        stats
            .iter()
            .find(|(n, _)| n == "on_cpu_sample")
            .map_or(f64::NAN, |(_, ns)| *ns)
    };
    let (python, native_frames, python_frames) =
        walk_cost_with_runtime(&deep_python(RUN_SECS), &args, "python_frames")?;
    let (c, c_frames, _) = walk_cost_with_runtime(&deep_stack(4)?, &args, "python_frames")?;
    let (python_ns, c_ns) = (ns_of(&python), ns_of(&c));
    writeln!(
        report,
        "| deep.py ({DEPTH} Python frames) | {python_ns:.0} | {native_frames:.1} | {python_frames:.1} |"
    )?;
    writeln!(report, "| deep.c | {c_ns:.0} | {c_frames:.1} | 0 |")?;
    writeln!(
        report,
        "\nThe Python sample costs {:.2} times the native one.\n",
        python_ns / c_ns
    )?;

    let (daemon, spy) = daemon_and_py_spy()?;
    writeln!(
        report,
        "CPU (utime + stime, % of one core) over {SECONDS} s with {PROCESSES} such Python processes running: the daemon under `--all` at defaults (99 Hz), and py-spy 0.4 (`record --rate 99 --nonblocking`) sampling one of them, at the same time.\n"
    )?;
    writeln!(
        report,
        "| sampler | CPU (% of one core) | processes sampled |"
    )?;
    writeln!(report, "| --- | --- | --- |")?;
    writeln!(
        report,
        "| profiler --all | {daemon:.2} | {PROCESSES} (and the rest of the machine) |"
    )?;
    writeln!(report, "| py-spy | {spy:.2} | 1 |\n")?;
    Ok(())
}

/// The daemon's and py-spy's CPU, in % of one core.
fn daemon_and_py_spy() -> anyhow::Result<(f64, f64)> {
    let seconds = (SECONDS + 5).to_string();
    let mut programs = (0..PROCESSES)
        .map(|_| Fixture::spawn(deep_python(&seconds)).context("starting deep.py"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let attached = attach(&profiler("", &["--all"]), 0)?.context("profiler")?;
    let py_spy = workspace_root().join("target/py-spy/bin/py-spy");
    let mut spy = Command::new(&py_spy)
        .args([
            "record",
            "--rate",
            "99",
            "--nonblocking",
            "--format",
            "raw",
            "-o",
            "/dev/null",
        ])
        .args(["--duration", &(SECONDS + 2).to_string()])
        .args(["--pid", &programs[0].pid().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", py_spy.display()))?;
    for program in &mut programs {
        program.go()?;
    }
    let (daemon, spy_pid) = (attached.child.id(), spy.id());
    let ticks0 = (cpu_ticks(daemon)?, cpu_ticks(spy_pid)?);
    let started = Instant::now();
    sleep(Duration::from_secs(SECONDS));
    let ticks = (
        cpu_ticks(daemon)? - ticks0.0,
        cpu_ticks(spy_pid)? - ticks0.1,
    );
    let elapsed = started.elapsed().as_secs_f64();
    attached.stop()?;
    let _ = spy.wait();
    #[expect(clippy::cast_precision_loss, reason = "percentages")]
    Ok((ticks.0 as f64 / elapsed, ticks.1 as f64 / elapsed))
}

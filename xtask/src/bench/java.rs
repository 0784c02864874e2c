//! Section 13: what Java frames cost. The kernel time of an on-CPU sample
//! of a JIT-compiled Java program 20 Java frames deep against a C
//! program's of about as many native frames, in one run; and the daemon's
//! CPU under `--all` with a JVM of 200 busy threads.
use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use profiler_fixtures::client::Fixture;

use super::{
    tools::{SCRATCH_DIR, attach, profiler},
    unwinding::{deep_stack, walk_cost_with_runtime},
};
use crate::{procfs::cpu_ticks, workspace::workspace_root};

/// Debian's JDK, the one the bench runs.
const JDK: &str = "/usr/lib/jvm/java-17-openjdk-amd64";
/// Java frames of the deep program.
const DEPTH: &str = "20";
/// The busy JVM's threads under `--all`.
const THREADS: &str = "200";
const SECONDS: u64 = 15;
/// The deep program's run: long enough that the JIT has compiled it for
/// most of it (about a second runs interpreted).
const JIT_SECS: &str = "8";
/// `deep.c`'s recursion, for about as many native frames.
const C_LEVELS: u32 = 16;

/// `Deep.java`, compiled once into the bench's scratch directory.
fn classes() -> anyhow::Result<PathBuf> {
    let dir = Path::new(SCRATCH_DIR).join("java");
    crate::workspace::run(
        Command::new(Path::new(JDK).join("bin/javac"))
            .arg("-d")
            .arg(&dir)
            .arg(workspace_root().join("profiler-fixtures/java/Deep.java")),
    )?;
    Ok(dir)
}

/// `Deep` for `seconds`, `DEPTH` Java frames deep on `threads` threads.
fn deep_java(classes: &Path, seconds: &str, threads: &str) -> Command {
    let mut command = Command::new(Path::new(JDK).join("bin/java"));
    command
        .arg("-cp")
        .arg(classes)
        .args(["Deep", seconds, DEPTH, threads]);
    command
}

pub(super) fn java_frames(report: &mut String) -> anyhow::Result<()> {
    writeln!(report, "## 13. Java frames\n")?;
    writeln!(
        report,
        "`on_cpu_sample`'s run_time_ns / run_cnt (bpf_stats) at 999 Hz (`--no-off-cpu`): Debian's OpenJDK 17 running `profiler-fixtures/java/Deep.java` {DEPTH} Java frames deep on one thread (JIT-compiled: the first second runs interpreted), and `deep.c` (plain `cc -O2`) {C_LEVELS} levels deep, one after the other, one copy per CPU (as section 6). Frames per sample from the daemon's counters (the Java frames are the ones the walk records; frames the JIT inlined are named from them and cost nothing in the kernel).\n"
    )?;
    writeln!(
        report,
        "| program | on_cpu_sample ns | native frames | Java frames |"
    )?;
    writeln!(report, "| --- | --- | --- | --- |")?;
    let classes = classes()?;
    let args = ["--no-off-cpu", "--frequency", "999"];
    let ns_of = |stats: &[(String, f64)]| {
        stats
            .iter()
            .find(|(n, _)| n == "on_cpu_sample")
            .map_or(f64::NAN, |(_, ns)| *ns)
    };
    let (java, native_frames, java_frames) =
        walk_cost_with_runtime(&deep_java(&classes, JIT_SECS, "1"), &args, "java_frames")?;
    let (c, c_frames, _) = walk_cost_with_runtime(&deep_stack(C_LEVELS)?, &args, "java_frames")?;
    let (java_ns, c_ns) = (ns_of(&java), ns_of(&c));
    writeln!(
        report,
        "| Deep.java ({DEPTH} Java frames) | {java_ns:.0} | {native_frames:.1} | {java_frames:.1} |"
    )?;
    writeln!(report, "| deep.c | {c_ns:.0} | {c_frames:.1} | 0 |")?;
    writeln!(
        report,
        "\nThe Java sample costs {:.2} times the native one.\n",
        java_ns / c_ns
    )?;
    let daemon = daemon_cpu(&classes)?;
    writeln!(
        report,
        "The daemon's CPU (utime + stime) over {SECONDS} s under `--all` at defaults (99 Hz), with one JVM running the same program on {THREADS} threads: {daemon:.2}% of one core.\n"
    )?;
    Ok(())
}

/// The daemon's CPU under `--all` with the JVM running, in % of one core.
fn daemon_cpu(classes: &Path) -> anyhow::Result<f64> {
    let seconds = (SECONDS + 5).to_string();
    let mut program =
        Fixture::spawn(deep_java(classes, &seconds, THREADS)).context("starting Deep.java")?;
    let attached = attach(&profiler("", &["--all"]), 0)?.context("profiler")?;
    program.go()?;
    let daemon = attached.child.id();
    let ticks0 = cpu_ticks(daemon)?;
    let started = Instant::now();
    sleep(Duration::from_secs(SECONDS));
    let ticks = cpu_ticks(daemon)? - ticks0;
    let elapsed = started.elapsed().as_secs_f64();
    attached.stop()?;
    #[expect(clippy::cast_precision_loss, reason = "a percentage")]
    Ok(ticks as f64 / elapsed)
}

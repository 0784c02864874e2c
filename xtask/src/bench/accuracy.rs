//! Section 5: off-CPU accuracy against the event budget, read back
//! with `go tool pprof`.
use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context as _, bail};

use super::{
    overhead::field,
    tools::{RUN_SECS, attach, go_and_wait, profiler_into, workload},
};

/// Error of the debiased off-CPU totals against the blockers fixture's own
/// measurement, and the share of intervals kept, at several rates.
pub(super) fn accuracy(report: &mut String) -> anyhow::Result<()> {
    writeln!(report, "## 5. Accuracy against event budget\n")?;
    writeln!(
        report,
        "The `blockers` fixture (threads blocking 100 µs, 1 ms and 20 ms at a time, each measuring its own off-CPU time) for {RUN_SECS} s per rate. Error = off_cpu in the thread's blocking function / measured - 1; kept = off-CPU intervals kept / seen (from the profile's comments).\n"
    )?;
    writeln!(
        report,
        "| --off-cpu-rate | 100 µs error | 1 ms error | 20 ms error | intervals kept |"
    )?;
    writeln!(report, "| --- | --- | --- | --- | --- |")?;
    for rate in ["0", "100us", "1ms", "5ms", "10ms", "20ms"] {
        let dir = tempdir()?;
        let mut workload = workload("blockers", &[RUN_SECS])?;
        let config = profiler_into(
            "",
            &["--pid", "{pid}", "--off-cpu-rate", rate, "--no-on-cpu"],
            &dir,
        );
        let attached = attach(&config, workload.pid())?.context("profiler")?;
        let line = go_and_wait(&mut workload)?;
        attached.stop()?;
        let file = fs::read_dir(&dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .next()
            .context("no profile written")?;
        let mut cells = Vec::new();
        for (class, function) in [
            ("short", "block_short"),
            ("medium", "block_medium"),
            ("long", "block_long"),
        ] {
            let truth = field(&line, &format!("{class}_ns")).context("truth")?;
            let measured = pprof_total(&file, function)?;
            cells.push(format!("{:+.1}%", (measured / truth - 1.0) * 100.0));
        }
        let raw = pprof_text(&file, &["-raw"])?;
        let seen = raw
            .lines()
            .find_map(|l| field(&l.replace("Comment:", ""), "off_cpu_events_seen"))
            .unwrap_or(0.0);
        let kept = raw
            .lines()
            .find_map(|l| field(&l.replace("Comment:", ""), "off_cpu_events_kept"))
            .unwrap_or(0.0);
        writeln!(
            report,
            "| {rate} | {} | {} | {} | {:.1}% |",
            cells[0],
            cells[1],
            cells[2],
            kept / seen.max(1.0) * 100.0
        )?;
        let _ = fs::remove_dir_all(&dir);
    }
    writeln!(report)?;
    Ok(())
}

pub(super) fn tempdir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "profiler-bench-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    Ok(dir)
}

pub(super) fn pprof_text(file: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(file)
        .output()
        .context("go tool pprof")?;
    if !out.status.success() {
        bail!(
            "go tool pprof {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// off_cpu nanoseconds of the samples whose stack contains `function`: the
/// cumulative column of its row in `go tool pprof -top`.
pub(super) fn pprof_total(file: &Path, function: &str) -> anyhow::Result<f64> {
    let text = pprof_text(
        file,
        &[
            "-sample_index=off_cpu",
            "-unit=ns",
            "-nodefraction=0",
            "-nodecount=100000",
            "-top",
        ],
    )?;
    // "  flat  flat%   sum%  cum  cum%  name": cum is the fourth column.
    let row = text
        .lines()
        .find(|l| {
            l.split_whitespace()
                .last()
                .is_some_and(|name| name.ends_with(&format!("::{function}")))
        })
        .with_context(|| format!("no row for {function} in:\n{text}"))?;
    let cum = row.split_whitespace().nth(3).context("cum column")?;
    cum.trim_end_matches("ns")
        .parse::<f64>()
        .with_context(|| format!("cum {cum:?}"))
}

//! `cargo xtask bench --against BINARY`: this tree's `sched_switch`
//! program against another build's, to about 2 ns a switch.
//!
//! Runs one after the other move with the host by more than the changes
//! worth measuring (single ping-pong runs here spread 50 to 70 ns a switch
//! within minutes). So both daemons run at once, under `--all`, and both
//! programs run on every switch of the same ping-pong: the host's moods
//! hit both alike. The program that runs second on a switch finds the
//! task's and run queue's lines warmed by the first (it reads some 5 ns
//! cheaper), so every round runs both orders, and the difference is
//! `((this first - other second) - (other first - this second)) / 2`,
//! where the order's share cancels, as far as it stays the same between
//! the two runs of a round. Two identical builds read -1.1 to +3.6 ns a
//! round this way (+2.0, the median of 6 rounds), so a difference within
//! about 2 ns is not one.
use std::{fmt::Write as _, fs, path::Path};

use anyhow::{Context as _, ensure};

use super::{
    kernel_cost::{around_run, loaded_programs},
    overhead::median,
    tools::{Attached, RUN_SECS, SCRATCH_DIR, attach, profiler_binary, release, workload},
};

/// Rounds, each of both orders (about 25 s a round).
const ROUNDS: usize = 10;

/// The program compared: the one every context switch runs.
const PROGRAM: &str = "sched_switch";

/// Compares `other`'s `sched_switch` with this tree's release build's,
/// round by round, into `report`.
pub(super) fn against(other: &Path, report: &mut String) -> anyhow::Result<()> {
    ensure!(other.is_file(), "no profiler binary at {}", other.display());
    let this = release("profiler");
    writeln!(
        report,
        "## `{PROGRAM}`: this tree against {}\n\nns per run (bpf_stats), both daemons under `--all` during one {RUN_SECS} s ping-pong, in both orders each round; the difference is this tree less the other, with the order's share taken out.\n",
        other.display()
    )?;
    writeln!(
        report,
        "| round | this first | other second | other first | this second | this less other |"
    )?;
    writeln!(report, "| --- | --- | --- | --- | --- | --- |")?;
    let mut differences = Vec::new();
    for round in 1..=ROUNDS {
        let (this_first, other_second) = side_by_side(&this, other)?;
        let (other_first, this_second) = side_by_side(other, &this)?;
        let difference = ((this_first - other_second) - (other_first - this_second)) / 2.0;
        writeln!(
            report,
            "| {round} | {this_first:.1} | {other_second:.1} | {other_first:.1} | {this_second:.1} | {difference:+.1} |"
        )?;
        differences.push(difference);
    }
    writeln!(
        report,
        "\nThis tree less the other: {:+.1} ns a switch (median of {ROUNDS} rounds).",
        median(&differences)
    )?;
    Ok(())
}

/// The ns per run of `PROGRAM` of the daemon started first (`first`) and
/// of the one started second, both attached during one ping-pong.
fn side_by_side(first: &Path, second: &Path) -> anyhow::Result<(f64, f64)> {
    let mut workload = workload("pingpong", &[RUN_SECS])?;
    let start = |binary: &Path, dir: &str| -> anyhow::Result<Attached> {
        let dir = Path::new(SCRATCH_DIR).join(dir);
        fs::create_dir_all(&dir)?;
        let config = profiler_binary(binary, "a profiler", &["--all"], &dir);
        attach(&config, workload.pid())?.context("profiler")
    };
    // In this order, so that the first's programs have the lower ids.
    let a = start(first, "first")?;
    let b = start(second, "second")?;
    let (before, after) = around_run(&mut workload, switch_programs)?;
    b.stop()?;
    a.stop()?;
    ensure!(
        before.len() == 2 && after.len() == 2,
        "expected two {PROGRAM} programs loaded, found {} (another profiler running?)",
        after.len()
    );
    let ns_per_run = |i: usize| {
        let (runs, ns) = (after[i].0 - before[i].0, after[i].1 - before[i].1);
        #[expect(clippy::cast_precision_loss, reason = "an average")]
        let average = ns as f64 / runs.max(1) as f64;
        average
    };
    Ok((ns_per_run(0), ns_per_run(1)))
}

/// (run_cnt, run_time_ns) of every loaded `PROGRAM`, in load order.
fn switch_programs() -> anyhow::Result<Vec<(u64, u64)>> {
    Ok(loaded_programs()?
        .into_iter()
        .filter(|p| p.name == PROGRAM)
        .map(|p| (p.runs, p.ns))
        .collect())
}

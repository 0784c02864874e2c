//! Section 1b: the ping-pong under the profiler at defaults against its
//! floor (the same daemon with the off-CPU programs returning at once),
//! paired run by run.
//!
//! Section 1 pairs every configuration with a run without the profiler,
//! so its default and floor rows are medians over different pairs, taken
//! minutes apart; their ratio carries the noise of both (one full run here
//! read 0.997x and 1.037x for `--pid` and `--all`, the next 1.035x and
//! 1.006x). The goal is stated against the floor, so here the two run back
//! to back, in both orders (alternating by round, so that what the second
//! run of a pair inherits from the first cancels), and the slowdown is the
//! median over the pairs of floor / defaults.
use std::fmt::Write as _;

use super::{
    overhead::{median, run_once},
    tools::{Config, RUN_SECS, profiler},
};

/// Pairs per target mode: twice section 1's rounds, as the difference
/// sought (1.5%) is below what single runs spread (up to 4%).
pub(super) const PAIRS: usize = 14;

/// The paired slowdowns of defaults over the floor.
pub(super) struct FloorPairs {
    pub(super) pid: Vec<f64>,
    pub(super) all: Vec<f64>,
}

impl FloorPairs {
    /// The median slowdown over the floor with `--pid`.
    pub(super) fn pid(&self) -> f64 {
        median(&self.pid)
    }

    /// The same with `--all`.
    pub(super) fn all(&self) -> f64 {
        median(&self.all)
    }
}

/// Runs the pairs for `--pid` and `--all` and writes section 1b.
pub(super) fn floor_pairs(report: &mut String) -> anyhow::Result<FloorPairs> {
    let pairs = FloorPairs {
        pid: pairs(&["--pid", "{pid}"], &[])?,
        all: pairs(&["--all"], &[])?,
    };
    writeln!(
        report,
        "## 1b. Ping-pong at defaults over its floor, paired\n\n\
         Each pair is one {RUN_SECS} s ping-pong under the profiler at defaults and one under the \
         same profiler with the off-CPU programs returning at once (the floor row of section 1), \
         back to back, in alternating order; {PAIRS} pairs per mode. The slowdown is the median \
         over the pairs of floor / defaults: what the programs' own work and the kept intervals \
         cost this workload, the part a change to them can move.\n"
    )?;
    slowdown_table(report, &[("--pid", &pairs.pid), ("--all", &pairs.all)])?;
    writeln!(report)?;
    Ok(pairs)
}

/// The table of `rows`: (the profiler's flags, its slowdowns over the
/// floor, one per pair), as the median and the range.
pub(super) fn slowdown_table(report: &mut String, rows: &[(&str, &[f64])]) -> anyhow::Result<()> {
    writeln!(
        report,
        "| target | slowdown over the floor (median) | min .. max |"
    )?;
    writeln!(report, "| --- | --- | --- |")?;
    for (name, ratios) in rows {
        let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let max = ratios.iter().copied().fold(0.0, f64::max);
        writeln!(
            report,
            "| profiler {name} | {:.3}x | {min:.3} .. {max:.3} |",
            median(ratios)
        )?;
    }
    Ok(())
}

/// The slowdowns of the profiler with target `target` at defaults (and
/// the flags `with`) over its floor, one per pair.
pub(super) fn pairs(target: &[&str], with: &[&str]) -> anyhow::Result<Vec<f64>> {
    let mut floor_args = target.to_vec();
    floor_args.push("--off-cpu-dispatch-only");
    pairs_of(&floor_args, &[target, with].concat())
}

/// The slowdowns of the profiler with `args` over the one with `floor`,
/// one per pair.
pub(super) fn pairs_of(floor: &[&str], args: &[&str]) -> anyhow::Result<Vec<f64>> {
    let defaults = profiler("profiler at defaults", args);
    let floor = profiler("profiler, the floor", floor);
    let run =
        |config: &Config, pair: usize| run_once("pingpong", "round_trips_per_sec", config, pair);
    let mut ratios = Vec::with_capacity(PAIRS);
    for pair in 0..PAIRS {
        let (floor_rate, defaults_rate) = if pair % 2 == 0 {
            let floor_rate = run(&floor, pair)?;
            (floor_rate, run(&defaults, pair)?)
        } else {
            let defaults_rate = run(&defaults, pair)?;
            (run(&floor, pair)?, defaults_rate)
        };
        ratios.push(floor_rate / defaults_rate);
    }
    Ok(ratios)
}

//! Sections 1 and 2: workload throughput under each configuration, in
//! interleaved rounds, as slowdowns paired by round.
use std::fmt::Write as _;

use anyhow::Context as _;

use super::tools::{
    Config, ROUNDS, RUN_SECS, attach, baseline, go_and_wait, has, profiler, workload,
};

pub(super) fn pingpong_configs() -> Vec<Config> {
    let mut configs = vec![
        baseline(),
        profiler(
            "profiler --pid (defaults: 99 Hz, off-CPU rate 10ms)",
            &["--pid", "{pid}"],
        ),
        profiler("profiler --all (defaults)", &["--all"]),
        profiler(
            "profiler --pid --off-cpu-rate 1ms (ten times the stacks)",
            &["--pid", "{pid}", "--off-cpu-rate", "1ms"],
        ),
        profiler(
            "profiler --pid --off-cpu-rate 4s (almost nothing kept: the bookkeeping alone)",
            &["--pid", "{pid}", "--off-cpu-rate", "4s"],
        ),
        profiler(
            "profiler --pid --off-cpu-rate 0 (every event)",
            &["--pid", "{pid}", "--off-cpu-rate", "0"],
        ),
        profiler(
            "profiler --pid --no-off-cpu (on-CPU only)",
            &["--pid", "{pid}", "--no-off-cpu"],
        ),
        profiler(
            "profiler --pid --unwind frame-pointer (no tables)",
            &["--pid", "{pid}", "--unwind", "frame-pointer"],
        ),
        profiler(
            "profiler --pid, as without task work (user stacks at rseq_update)",
            &["--pid", "{pid}", "--off-cpu-no-task-work"],
        ),
        profiler(
            "profiler --pid --off-cpu-sys-exit (no task work: rseq_update and sys_exit)",
            &["--pid", "{pid}", "--off-cpu-sys-exit"],
        ),
        profiler(
            "profiler --pid, off-CPU programs returning at once (the floor)",
            &["--pid", "{pid}", "--off-cpu-dispatch-only"],
        ),
    ];
    if has("offcputime") {
        configs.push(Config {
            name: "libbpf-tools offcputime -p",
            command: Some(vec!["offcputime".into(), "-p".into(), "{pid}".into()]),
            // It prints nothing until it ends, and SIGINT simply ends it.
            ready_marker: None,
        });
    }
    if has("perf") {
        configs.push(Config {
            name: "perf record -F 99 -g -p",
            command: Some(
                [
                    "perf",
                    "record",
                    "-q",
                    "-F",
                    "99",
                    "-g",
                    "-o",
                    "/tmp/profiler-bench-perf.data",
                    "-p",
                    "{pid}",
                ]
                .map(String::from)
                .to_vec(),
            ),
            ready_marker: None,
        });
    }
    configs
}

pub(super) fn cpu_configs() -> Vec<Config> {
    vec![
        baseline(),
        profiler(
            "profiler --pid --no-off-cpu, 99 Hz",
            &["--pid", "{pid}", "--no-off-cpu"],
        ),
        profiler(
            "profiler --pid --no-off-cpu, 999 Hz",
            &["--pid", "{pid}", "--no-off-cpu", "--frequency", "999"],
        ),
        profiler("profiler --pid (defaults, 99 Hz)", &["--pid", "{pid}"]),
        profiler(
            "profiler --pid --no-off-cpu --unwind frame-pointer, 999 Hz",
            &[
                "--pid",
                "{pid}",
                "--no-off-cpu",
                "--frequency",
                "999",
                "--unwind",
                "frame-pointer",
            ],
        ),
    ]
}

/// One configuration's runs, each with the baseline run just before it.
pub(super) struct Measured {
    pub name: String,
    /// The workload's rate in each run.
    pub rates: Vec<f64>,
    /// The baseline's rate in the run just before each of `rates` (for the
    /// baseline itself, its own runs).
    pub baselines: Vec<f64>,
}

impl Measured {
    /// The slowdown against the baseline, paired run by run: the median
    /// of baseline / configuration over the pairs. A pair is two runs a
    /// few seconds apart, so the machine's drift over minutes (other
    /// tenants), which moved the baseline by 7% between rounds here,
    /// cancels. The noise of single runs stays: 3 s ping-pong runs side
    /// by side differed by up to 4%.
    pub fn slowdown(&self) -> f64 {
        paired_slowdown(&self.baselines, &self.rates)
    }
}

/// Runs every configuration `ROUNDS` times, interleaved, each round
/// starting one configuration later than the one before, so that no
/// configuration always runs at the same point of a round (after the
/// same neighbour, as the machine warms or drifts). Each run of a
/// configuration follows a run of the baseline (`configs[0]`), its pair.
pub(super) fn overhead(
    fixture: &str,
    metric: &str,
    configs: &[Config],
) -> anyhow::Result<Vec<Measured>> {
    let (baseline, rest) = configs.split_first().context("no baseline")?;
    let mut measured: Vec<Measured> = configs
        .iter()
        .map(|c| Measured {
            name: c.name.to_owned(),
            rates: Vec::new(),
            baselines: Vec::new(),
        })
        .collect();
    for round in 0..ROUNDS {
        for k in 0..rest.len() {
            let i = (round + k) % rest.len();
            let base = run_once(fixture, metric, baseline, round)?;
            let rate = run_once(fixture, metric, &rest[i], round)?;
            measured[0].rates.push(base);
            measured[0].baselines.push(base);
            measured[i + 1].rates.push(rate);
            measured[i + 1].baselines.push(base);
        }
    }
    Ok(measured)
}

/// One run of the workload under `config`: its rate.
pub(super) fn run_once(
    fixture: &str,
    metric: &str,
    config: &Config,
    round: usize,
) -> anyhow::Result<f64> {
    let mut workload = workload(fixture, &[RUN_SECS])?;
    let attached = attach(config, workload.pid())?;
    let line = go_and_wait(&mut workload)?;
    if let Some(attached) = attached {
        attached.stop()?;
    }
    let rate = field(&line, metric).with_context(|| format!("{fixture} printed {line:?}"))?;
    eprintln!("  round {}: {:<55} {rate:>12.0}", round + 1, config.name);
    Ok(rate)
}

pub(super) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// The slowdown of `rates` against `baseline`, paired element by element:
/// the median of baseline / configuration.
pub(super) fn paired_slowdown(baseline: &[f64], rates: &[f64]) -> f64 {
    let ratios: Vec<f64> = baseline.iter().zip(rates).map(|(b, r)| b / r).collect();
    median(&ratios)
}

pub(super) fn table(
    report: &mut String,
    title: &str,
    unit: &str,
    results: &[Measured],
) -> anyhow::Result<()> {
    writeln!(report, "## {title}\n")?;
    writeln!(
        report,
        "| configuration | median {unit} | min .. max | slowdown (paired with the baseline run before each) |"
    )?;
    writeln!(report, "| --- | --- | --- | --- |")?;
    for m in results {
        let min = m.rates.iter().copied().fold(f64::INFINITY, f64::min);
        let max = m.rates.iter().copied().fold(0.0, f64::max);
        writeln!(
            report,
            "| {} | {:.0} | {min:.0} .. {max:.0} | {:.3}x |",
            m.name,
            median(&m.rates),
            m.slowdown()
        )?;
    }
    writeln!(report)?;
    Ok(())
}

/// The number after `key=` in a line of `key=value` words.
pub(super) fn field(line: &str, key: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

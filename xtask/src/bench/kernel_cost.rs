//! Section 3: kernel time per run of each program, from bpf_stats.
use std::{fmt::Write as _, fs, process::Command};

use anyhow::Context as _;
use profiler_fixtures::client::Fixture;

use super::{
    overhead::median,
    tools::{RUN_SECS, attach, go_and_wait, profiler, workload},
};

/// Rounds of the four configurations. Their two pairs (defaults and
/// floor, with and without task work) run side by side in each round, so
/// that the programs' own work is a difference of two adjacent runs.
const COST_ROUNDS: usize = 5;

/// The configurations, in the order each round runs them: defaults, the
/// floor, and both as without task work.
const CONFIGS: [&[&str]; 4] = [
    &["--all"],
    &["--all", "--off-cpu-dispatch-only"],
    &["--all", "--off-cpu-no-task-work"],
    &["--all", "--off-cpu-no-task-work", "--off-cpu-dispatch-only"],
];

/// What section 3 gives the goals, in ns per context switch.
pub(super) struct SwitchCosts {
    /// All off-CPU programs at defaults.
    pub(super) per_switch_ns: f64,
    /// Their own work: defaults less the floor, paired by round.
    pub(super) own_work_ns: f64,
}

/// Average kernel time per run of each of the profiler's programs, from
/// the kernel's own accounting (kernel.bpf_stats_enabled), at defaults and
/// with the off-CPU programs returning at once (the floor: the hook and
/// bpf_stats' own clock reads), as medians over [`COST_ROUNDS`] rounds.
/// Returns the time of all off-CPU programs per sched_switch run, and how
/// much of it is their own work: what one context switch costs, wakeups
/// and returns to user space included.
pub(super) fn program_costs(report: &mut String) -> anyhow::Result<SwitchCosts> {
    let mut rounds: [Vec<Vec<Cost>>; 4] = Default::default();
    for _ in 0..COST_ROUNDS {
        for (runs, args) in rounds.iter_mut().zip(CONFIGS) {
            runs.push(per_run_costs(args)?);
        }
    }
    let [defaults, floor, rseq, rseq_floor] = &rounds;
    writeln!(report, "## 3. Per-program kernel cost (bpf_stats)\n")?;
    writeln!(
        report,
        "run_time_ns / run_cnt per program, while the ping-pong runs under `profiler --all`, the median over {COST_ROUNDS} rounds; the floor column is the same run with the off-CPU programs returning at once (test knob `--off-cpu-dispatch-only`, cargo feature `test-knobs`), right after it in each round: the cost of the hook itself plus bpf_stats' own two clock reads per run, which no change to a program can remove. The last columns are the same two runs as without BPF task work (`--off-cpu-no-task-work`: user stacks at `rseq_update`, as on kernels before 6.18).\n"
    )?;
    writeln!(
        report,
        "| program | runs | ns per run | floor ns per run | without task work: ns per run | floor |"
    )?;
    writeln!(report, "| --- | --- | --- | --- | --- | --- |")?;
    let mut names: Vec<&str> = defaults
        .iter()
        .chain(rseq)
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        writeln!(
            report,
            "| {name} | {:.0} | {} | {} | {} | {} |",
            median_of(defaults, |round| find(round, name).map(Cost::run_count)).unwrap_or(0.0),
            ns_of(defaults, name),
            ns_of(floor, name),
            ns_of(rseq, name),
            ns_of(rseq_floor, name),
        )?;
    }
    let median_switch = |rounds: &[Vec<Cost>]| median_of(rounds, |r| Some(per_switch(r)));
    let own = |with: &[Vec<Cost>], without: &[Vec<Cost>]| {
        let diffs: Vec<f64> = with
            .iter()
            .zip(without)
            .map(|(w, f)| per_switch(w) - per_switch(f))
            .collect();
        median(&diffs)
    };
    // With task work, nothing runs at `rseq_update`: where it ran at
    // defaults, this kernel refused the task work (the daemon's log says
    // so at its start), and the defaults ran as without it: the goals
    // read the columns without task work, against their own floor.
    let refused = median_of(defaults, |round| {
        find(round, "rseq_update").map(Cost::run_count)
    })
    .is_some_and(|runs| runs > 0.0);
    let (goal, goal_floor) = if refused {
        (rseq, rseq_floor)
    } else {
        (defaults, floor)
    };
    let costs = SwitchCosts {
        per_switch_ns: median_switch(goal).unwrap_or(f64::NAN),
        own_work_ns: own(goal, goal_floor),
    };
    writeln!(
        report,
        "\nAll off-CPU programs together: {:.1} ns per context switch, of which the floor is {:.1} ns; the programs' own work (the median over the rounds of defaults less the floor) is {:.1} ns. Without task work: {:.1} ns, floor {:.1} ns, own work {:.1} ns. bpf_stats does not see the task work callback (the kernel calls it directly, on the way back to user space, only for kept intervals): it walks the user stack that `rseq_update` walked for the same intervals, which is part of the rseq_update figure without task work. Section 1's ping-pong ratios include it.\n",
        median_switch(defaults).unwrap_or(f64::NAN),
        median_switch(floor).unwrap_or(f64::NAN),
        own(defaults, floor),
        median_switch(rseq).unwrap_or(f64::NAN),
        median_switch(rseq_floor).unwrap_or(f64::NAN),
        own(rseq, rseq_floor),
    )?;
    if refused {
        writeln!(
            report,
            "On this kernel the defaults ran without task work too: `rseq_update` ran at defaults, which it does only without it (the verifier refused the task work from `sched_switch`, and the daemon took user stacks at `rseq_update`; README, Stacks of off-CPU time). Its floor did not: with the programs returning at once the task work is dead code, which the verifier takes, so that floor has no `rseq_update` and the defaults' own work above counts `rseq_update`'s runs. Read the columns without task work: they are this kernel's defaults, against their own floor (the goals' rows do).\n"
        )?;
    }
    Ok(costs)
}

/// Program `name`'s costs in one round's run.
pub(super) fn find<'a>(costs: &'a [Cost], name: &str) -> Option<&'a Cost> {
    costs.iter().find(|c| c.name == name)
}

/// The median over `rounds` of what `value` reads in each (rounds where
/// it reads nothing are left out); None if it reads nothing in any.
pub(super) fn median_of(
    rounds: &[Vec<Cost>],
    value: impl Fn(&[Cost]) -> Option<f64>,
) -> Option<f64> {
    let values: Vec<f64> = rounds.iter().filter_map(|r| value(r)).collect();
    (!values.is_empty()).then(|| median(&values))
}

/// Program `name`'s median ns per run over `rounds`, for the table.
fn ns_of(rounds: &[Vec<Cost>], name: &str) -> String {
    median_of(rounds, |round| find(round, name).map(Cost::ns_per_run))
        .map_or_else(|| "-".to_owned(), |ns| format!("{ns:.0}"))
}

/// One program's runs and kernel time over a measurement.
pub(super) struct Cost {
    pub(super) name: String,
    pub(super) runs: u64,
    pub(super) ns: u64,
}

impl Cost {
    #[expect(clippy::cast_precision_loss, reason = "a count, for a table")]
    pub(super) fn run_count(&self) -> f64 {
        self.runs as f64
    }

    #[expect(clippy::cast_precision_loss, reason = "an average")]
    pub(super) fn ns_per_run(&self) -> f64 {
        self.ns as f64 / self.runs.max(1) as f64
    }
}

/// The ping-pong under `profiler ARGS`: each program's runs and time.
pub(super) fn per_run_costs(args: &[&str]) -> anyhow::Result<Vec<Cost>> {
    per_run_costs_on("pingpong", &[RUN_SECS], args)
}

/// As [`per_run_costs`], over one run of `fixture` with `fixture_args`.
pub(super) fn per_run_costs_on(
    fixture: &str,
    fixture_args: &[&str],
    args: &[&str],
) -> anyhow::Result<Vec<Cost>> {
    let mut workload = workload(fixture, fixture_args)?;
    let attached = attach(&profiler("", args), workload.pid())?.context("profiler")?;
    let (before, after) = around_run(&mut workload, bpf_stats)?;
    attached.stop()?;
    Ok(after
        .into_iter()
        .map(|(name, (runs, ns))| {
            let (runs0, ns0) = before
                .iter()
                .find(|(n, _)| *n == name)
                .map_or((0, 0), |(_, v)| *v);
            Cost {
                name,
                runs: runs - runs0,
                ns: ns - ns0,
            }
        })
        .collect())
}

/// What `read` reads before and after `workload`'s measured phase, with
/// the kernel's bpf_stats on in between.
pub(super) fn around_run<T>(
    workload: &mut Fixture,
    read: impl Fn() -> anyhow::Result<T>,
) -> anyhow::Result<(T, T)> {
    const STATS_ENABLED: &str = "/proc/sys/kernel/bpf_stats_enabled";
    fs::write(STATS_ENABLED, "1")?;
    let before = read()?;
    go_and_wait(workload)?;
    let after = read()?;
    fs::write(STATS_ENABLED, "0")?;
    Ok((before, after))
}

/// Time of every off-CPU program per sched_switch run (not the sampler's,
/// nor the goroutine wakers' probe).
pub(super) fn per_switch(costs: &[Cost]) -> f64 {
    let switches = costs
        .iter()
        .find(|c| c.name == "sched_switch")
        .map_or(0, |c| c.runs);
    let tracing_ns: u64 = costs
        .iter()
        .filter(|c| c.name != "on_cpu_sample" && c.name != "go_ready")
        .map(|c| c.ns)
        .sum();
    #[expect(clippy::cast_precision_loss, reason = "an average")]
    let per_switch = tracing_ns as f64 / switches.max(1) as f64;
    per_switch
}

/// The profiler's programs, by their (kernel-truncated) names.
pub(super) const PROGRAMS: [&str; 7] = [
    "on_cpu_sample",
    "sched_switch",
    "rseq_update",
    "sys_exit",
    "sched_process_e",
    "sched_waking",
    "go_ready",
];

/// (name, (run_cnt, run_time_ns)) of the profiler's programs. Only one
/// profiler runs during the measurement, so names identify them.
pub(super) fn bpf_stats() -> anyhow::Result<Vec<(String, (u64, u64))>> {
    let mut stats: Vec<(String, (u64, u64))> = loaded_programs()?
        .into_iter()
        .filter(|p| PROGRAMS.contains(&p.name.as_str()))
        .map(|p| (p.name, (p.runs, p.ns)))
        .collect();
    stats.sort();
    Ok(stats)
}

/// One loaded BPF program as `bpftool prog show` lists it.
pub(super) struct Loaded {
    pub(super) id: u32,
    pub(super) name: String,
    pub(super) runs: u64,
    pub(super) ns: u64,
}

/// Every loaded program with bpf_stats figures, in id (load) order.
pub(super) fn loaded_programs() -> anyhow::Result<Vec<Loaded>> {
    let out = Command::new("bpftool")
        .args(["prog", "show"])
        .output()
        .context("bpftool")?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "709: tracing  name sched_switch  tag ...  gpl run_time_ns 1883250 run_cnt 155"
    let mut programs = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let after = |key: &str| {
            words
                .iter()
                .position(|w| *w == key)
                .and_then(|i| words.get(i + 1))
        };
        let id = words
            .first()
            .and_then(|w| w.strip_suffix(':')?.parse().ok());
        let (Some(id), Some(name), Some(ns), Some(runs)) =
            (id, after("name"), after("run_time_ns"), after("run_cnt"))
        else {
            continue;
        };
        programs.push(Loaded {
            id,
            name: (*name).to_owned(),
            runs: runs.parse().unwrap_or(0),
            ns: ns.parse().unwrap_or(0),
        });
    }
    programs.sort_by_key(|p| p.id);
    Ok(programs)
}

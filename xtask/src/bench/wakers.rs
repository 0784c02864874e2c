//! Section 3c: what `--wakers` costs a context-switch-heavy workload.
//!
//! The ping-pong wakes a thread at every switch. Under `--wakers`, each
//! wakeup of a target runs `sched_waking` (the target check and a look at
//! the woken thread's interval), and about one in a hundred (those within
//! 100 µs of their threshold, at the default 10 ms rate) takes the
//! waker's stacks. Paired against the floor as section 1b, so that the
//! goal reads against the same floor.
use std::{fmt::Write as _, time::Instant};

use anyhow::Context as _;

use super::{
    floor::{PAIRS, pairs, pairs_of, slowdown_table},
    kernel_cost::{Cost, find, median_of, per_run_costs, per_switch},
    overhead::median,
    tools::{RUN_SECS, attach, go_and_wait, profiler, workload},
};
use crate::procfs::cpu_ticks;

/// Rounds of the bpf_stats measurement.
const COST_ROUNDS: usize = 3;

/// Seconds of ping-pong the daemon's CPU is measured over.
const DAEMON_SECS: &str = "20";

/// What section 3c gives the goals.
pub(super) struct WakersCost {
    /// The ping-pong's median slowdown with `--all --wakers` over the floor.
    pub(super) all: f64,
}

/// Runs the pairs and the bpf_stats rounds, and writes section 3c.
pub(super) fn wakers(report: &mut String) -> anyhow::Result<WakersCost> {
    let pid = pairs(&["--pid", "{pid}"], &["--wakers"])?;
    let all = pairs(&["--all"], &["--wakers"])?;
    // The hook alone: sched_waking attached, returning at once.
    let floor = ["--all", "--off-cpu-dispatch-only"];
    let hook = pairs_of(&floor, &[&floor[..], &["--wakers"]].concat())?;
    let rounds: Vec<Vec<Cost>> = (0..COST_ROUNDS)
        .map(|_| per_run_costs(&["--all", "--wakers"]))
        .collect::<anyhow::Result<_>>()?;
    writeln!(
        report,
        "## 3c. `--wakers` on the ping-pong\n\n\
         The ping-pong under the profiler with `--wakers` over the floor (section 1b's, the \
         off-CPU programs returning at once), paired the same way: {PAIRS} pairs of {RUN_SECS} s \
         per mode, the median of floor / with wakers. Then `sched_waking`'s kernel time per run \
         (one run per wakeup on the machine) from bpf_stats under `--all --wakers`, the median \
         over {COST_ROUNDS} rounds, and all off-CPU programs per context switch. The last row \
         is the floor with `sched_waking` attached too, returning at once, over the floor: what \
         the hook costs before it does anything.\n"
    )?;
    slowdown_table(
        report,
        &[
            ("--pid --wakers", &pid),
            ("--all --wakers", &all),
            ("--all, the floor with sched_waking attached", &hook),
        ],
    )?;
    let waking = |value: fn(&Cost) -> f64| {
        median_of(&rounds, |round| find(round, "sched_waking").map(value)).unwrap_or(f64::NAN)
    };
    writeln!(
        report,
        "\n`sched_waking`: {:.0} ns per run over {:.0} runs; all off-CPU programs: {:.1} ns per \
         context switch (section 3's defaults row, without wakers, is the comparison).\n",
        waking(Cost::ns_per_run),
        waking(Cost::run_count),
        median_of(&rounds, |r| Some(per_switch(r))).unwrap_or(f64::NAN),
    )?;
    let (without, with, what_if) = (
        daemon_cpu(&["--all"])?,
        daemon_cpu(&["--all", "--wakers"])?,
        daemon_cpu(&["--all", "--wakers", "--what-if", "main:50"])?,
    );
    writeln!(
        report,
        "The daemon's CPU (utime + stime, % of one core) over {DAEMON_SECS} s of ping-pong under \
         `--all`, one run each: {without:.2}% without wakers, {with:.2}% with `--wakers`, \
         {what_if:.2}% with `--what-if main:50` too (the wakers' records drained, their stacks \
         symbolized, the critical path and the estimate made each window).\n"
    )?;
    Ok(WakersCost { all: median(&all) })
}

/// The daemon's CPU with `args` while the ping-pong runs, in % of one core.
fn daemon_cpu(args: &[&str]) -> anyhow::Result<f64> {
    let mut pingpong = workload("pingpong", &[DAEMON_SECS])?;
    let attached = attach(&profiler("", args), pingpong.pid())?.context("profiler")?;
    let daemon = attached.child.id();
    let ticks0 = cpu_ticks(daemon)?;
    let started = Instant::now();
    go_and_wait(&mut pingpong)?;
    let ticks = cpu_ticks(daemon)? - ticks0;
    let elapsed = started.elapsed().as_secs_f64();
    attached.stop()?;
    #[expect(clippy::cast_precision_loss, reason = "a percentage")]
    Ok(ticks as f64 / elapsed)
}

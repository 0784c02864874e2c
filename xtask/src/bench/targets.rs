//! The Targets section: the goals against what one run measured, and
//! where the costs come from.
use std::fmt::Write as _;

use super::{
    churn::Churn, daemon_cost::DaemonCost, distinct::DistinctRss, floor::FloorPairs,
    kernel_cost::SwitchCosts, overhead::Measured, unwinding::WalkCosts, wakers::WakersCost,
};

/// What one run measured, for the goals.
pub(super) struct Measurements<'a> {
    pub(super) floor: &'a FloorPairs,
    pub(super) cpu: &'a [Measured],
    pub(super) syscalls: &'a [Measured],
    pub(super) switch_costs: SwitchCosts,
    pub(super) daemon: &'a DaemonCost,
    /// Percent of a process's samples without a full stack, started
    /// 100 ms after the daemon.
    pub(super) startup_partial: f64,
    pub(super) goroutine_pingpong: f64,
    pub(super) walk: &'a WalkCosts,
    pub(super) storm_percent: f64,
    pub(super) churn: &'a Churn,
    pub(super) distinct_rss: &'a DistinctRss,
    pub(super) wakers: &'a WakersCost,
}

/// The goals: (goal, measured, target, unit).
pub(super) fn goals(m: &Measurements<'_>) -> Vec<(&'static str, f64, f64, &'static str)> {
    let slowdown = |results: &[Measured], i: usize| results[i].slowdown();
    #[expect(clippy::cast_precision_loss, reason = "megabytes")]
    let mb = |bytes: u64| bytes as f64 / 1e6;
    let (pid, all) = (&m.daemon.pid, &m.daemon.all);
    vec![
        (
            "ping-pong slowdown, profiler --pid at defaults, over the floor (1b)",
            m.floor.pid(),
            1.015,
            "x",
        ),
        (
            "ping-pong slowdown, profiler --all at defaults, over the floor (1b)",
            m.floor.all(),
            1.015,
            "x",
        ),
        (
            "ping-pong slowdown, profiler --all --wakers, over the floor (3c)",
            m.wakers.all,
            1.015,
            "x",
        ),
        (
            "getppid loop slowdown, profiler --pid of another (idle) process",
            slowdown(m.syscalls, 1),
            1.02,
            "x",
        ),
        (
            "getppid loop slowdown, profiler --all",
            slowdown(m.syscalls, 2),
            1.05,
            "x",
        ),
        (
            "CPU-bound slowdown, on-CPU only at 99 Hz",
            slowdown(m.cpu, 1),
            1.01,
            "x",
        ),
        (
            "on-CPU sample with tables, `deep.c` at about 10 frames (issue 61: 1 µs)",
            m.walk.ten_frames_ns,
            1000.0,
            "ns",
        ),
        (
            "the same, per frame from about 10 to 60 frames",
            m.walk.per_frame_ns,
            200.0,
            "ns",
        ),
        (
            "BPF time per context switch (all tracing programs)",
            m.switch_costs.per_switch_ns,
            150.0,
            "ns",
        ),
        (
            "the same, less the floor of programs that return at once",
            m.switch_costs.own_work_ns,
            25.0,
            "ns",
        ),
        (
            "daemon CPU, --pid of a 200-thread process, 5 s windows",
            pid.cpu_pct,
            0.5,
            "% of a core",
        ),
        (
            "daemon CPU, --all, 5 s windows",
            all.cpu_pct,
            0.8,
            "% of a core",
        ),
        ("daemon peak RSS, --all", mb(all.rss_bytes), 64.0, "MB"),
        (
            "start-up, --all: samples of a process started 100 ms after the daemon without a full stack",
            m.startup_partial,
            1.0,
            "%",
        ),
        (
            "BPF maps' kernel memory at defaults, --all",
            mb(all.maps_bytes),
            48.0,
            "MB",
        ),
        (
            "goroutine ping-pong slowdown, goroutine view at defaults",
            m.goroutine_pingpong,
            1.05,
            "x",
        ),
    ]
    .into_iter()
    .chain(churn_goals(m))
    .collect()
}

/// The goals of processes that start all the time (sections 10c, 15, 16).
fn churn_goals(m: &Measurements<'_>) -> [(&'static str, f64, f64, &'static str); 8] {
    let churn = m.churn;
    [
        (
            "daemon CPU in a fork/exec storm, 1000 /bin/true a second (10c)",
            m.storm_percent,
            3.0,
            "% of a core",
        ),
        (
            "daemon CPU per new process, a shell loop of real programs (15)",
            churn.shell_us,
            50.0,
            "µs",
        ),
        (
            "daemon CPU during make -j2 of a C project (15)",
            churn.build_daemon_percent,
            2.0,
            "% of a core",
        ),
        (
            "make -j2 wall time with the daemon over without (15)",
            churn.build_slowdown,
            1.01,
            "x",
        ),
        (
            "user frames unnamed, the shell loop's first window's share over the later ones' (15)",
            churn.first_window_unnamed,
            2.0,
            "x",
        ),
        (
            "daemon peak RSS, start and the shell loop's first window over the loop after (15)",
            churn.cold_peak_rss,
            1.1,
            "x",
        ),
        (
            "daemon RSS after 5,000 distinct programs over after the first 500, each once their window is written (16)",
            m.distinct_rss.goal,
            1.2,
            "x",
        ),
        (
            "daemon RSS after 20,000 distinct programs over after 10,000, each once their window is written (16)",
            m.distinct_rss.level,
            1.05,
            "x",
        ),
    ]
}

pub(super) fn targets(report: &mut String, rows: &[(&str, f64, f64, &str)]) -> anyhow::Result<()> {
    writeln!(report, "## Targets\n")?;
    writeln!(report, "| goal | target | measured | |")?;
    writeln!(report, "| --- | --- | --- | --- |")?;
    for (goal, measured, target, unit) in rows {
        let verdict = if measured <= target { "met" } else { "missed" };
        writeln!(
            report,
            "| {goal} | <= {target} {unit} | {measured:.3} {unit} | {verdict} |"
        )?;
    }
    writeln!(report, "\n{ANALYSIS}")?;
    Ok(())
}

/// Where the costs come from; true whatever a run measures.
const ANALYSIS: &str = "\
### Where the costs come from

- Ping-pong: every round trip is two context switches, each of which
  runs one program (sched_switch); returns to user space run none (the
  user stack of a kept interval is taken by a BPF task work scheduled
  for that interval only; without task work, `rseq_update` ran on every
  return), and wakeups run none (the run-queue split is read from the
  scheduler's own `sched_info`). The off-CPU programs never capture a
  stack for the short intervals they drop; what remains is the per-event
  bookkeeping, with no helper call: the open interval of the thread
  leaving and of the thread arriving is in an array cell each thread
  owns (`INTERVAL_CELLS`, an array read the verifier inlines; it was two
  `bpf_task_storage_get` calls, about 40 ns a switch here). Task storage
  is looked up only for kept intervals and for a thread seen for the
  first time, which also pays a `TARGETS` hash lookup. Timestamps, the
  run-queue split and the rule's random bits cost no helper call either
  (the scheduler's clock and `sched_info` read off the task, a per-CPU
  xorshift); `bpf_ktime_get_ns` alone cost about 85 ns a switch here.
  Capturing stacks at every switch-out (`offcputime`) or at every event
  (`--off-cpu-rate 0`) is what costs 2x and more.
- The floor row runs the same programs but has them return at
  once (test knob `--off-cpu-dispatch-only`, cargo feature `test-knobs`): what the hooks cost before
  any bookkeeping. The default rows minus the floor is the bookkeeping;
  with `--pid`, the rest of the machine's threads are passed over before
  any lookup: their ids are read off the task and one byte of
  `TARGET_FILTER` (an array read, inlined) says they are not targets.
  Section 8b shows what that leaves: the floor and a few loads (with two
  task-storage misses, a helper call and a hash lookup per switch, that
  ping-pong ran at 1.105x). bpf_stats adds its own clock reads
  to every run it measures, so section 3 overstates small programs: its
  floor column is what the programs show when they return at once. The
  row \"less the floor\" is the programs' own work, the part a change to
  them can move. On this machine (retpolines on every indirect call, return
  thunks on every return) the floor of two programs per switch (sched_switch and
  rseq_update, without task work) alone was close to the 1.05x goal;
  task work leaves one, which alone reads 1.03-1.05x here.
- The default ping-pong row splits into the floor, the bookkeeping of
  every switch (the `--off-cpu-rate 4s` row, where almost nothing is
  kept), and the intervals kept: at the 10 ms default about 1 in 10,000
  of these 1 µs intervals, some 100 a second (a thread's stacks are
  taken at most about 100 times a second at 10 ms, as on-CPU samples at
  99 Hz); at 1 ms ten times as many. Each has a kernel stack, a task
  work and a user stack walk, about 20 µs in all here, measured at
  `--off-cpu-rate 100us` (10,000 kept a second: ping-pong throughput
  and bpf_stats against the 4 s rate). About 8 µs of that is in
  `sched_switch`, nearly all in the task-work kfunc: it defers
  `task_work_add` through an IRQ work, so every kept interval raises a
  self-interrupt (the `IWI` line of `/proc/interrupts` counts one per
  kept interval), which in this virtual machine goes through the
  hypervisor; without task work the same kept interval costs about 1 µs
  in `sched_switch`. The rest is the interrupt, the task work and its
  user stack walk. Flushing kept weight at the thread's next switch-out
  instead costs as much (the walk moves into `sched_switch`) and is not
  exact for threads that ran user code in between.
- The bookkeeping of a switch where both threads are targets, by
  bpf_stats with early returns in turn, under `--all` (2026-11-27,
  medians of five 2 s ping-pongs, about 26 ns in all): the target
  checks of `prev` and `next` 5-7 ns, the switch-out about 15 ns (the
  run queue's clock is three dependent loads, `task` to `cfs_rq` to `rq`
  to `clock`), the switch-in of a dropped interval 2-4 ns (one
  comparison: the rule's threshold is drawn at switch-out). Taking
  instructions out did not show: four fewer on the hot path (no process
  ids with `--all`, the interval written whole) or a cheaper random step
  (an LCG for the xorshift) read the same within the 5 ns that single
  rounds spread. What is left is load latency: every step waits on a
  load of the task, its cell or this CPU's entry, and an array lookup
  passes its key through the stack. 1.5% over the floor is 1.5% of a
  round trip of two switches: about 20 ns of own work a switch at
  370,000 round trips a second, about 33 ns at 225,000.
- The ping-pong goals are read from section 1b, which runs defaults
  and the floor back to back. Section 1 pairs every row with a run
  without the profiler, so its default and floor rows are minutes
  apart: their ratio read 0.997x and 1.037x (`--pid`, `--all`) in one
  full run and 1.035x and 1.006x in the next, on the same code.
  Single pairs in 1b still spread by 3% either way, so a median within
  about 0.5% of the goal decides nothing.
- User stacks of off-CPU intervals are taken by task work, once per kept
  interval, not at `sys_exit`, once per system call: section 8 shows
  what a `sys_exit` hook costs every process on the machine, profiled or
  not. Every thread gets exact stacks this way, Go's too (no rseq
  needed). Without task work (kernels before 6.18), `rseq_update` takes
  them once per switch, threads without rseq get the stack of their next
  switch-out (README, \"Stacks of off-CPU time\"), or exact ones with
  `--off-cpu-sys-exit` at that cost.
- The on-CPU sampler costs microseconds per sample: a fixed part (the
  program's start, the kernel stack and a 1 KiB stack copy into the map:
  the frame-pointer row, which walks one frame) and the user stack walk
  by table, one `bpf_loop` iteration per frame with the row searched
  within one bucket of the binary's table index (tens of ns a frame in
  `deep.c`'s small table; more in a large table, whose rows the
  profiled program evicts from the cache between samples). Section 6 compares it with frame pointers only, which walk one
  frame of these fixtures (release Rust without frame pointers) where the
  tables walk nine. At 99 Hz per CPU that is well under 1% of a core,
  within the noise of the CPU-bound run. An off-CPU capture (in the
  task work callback) pays the same walk for each kept interval.
- Tables are built once per binary: milliseconds for libc and the
  profiler (section 7), memory at 8 bytes a row (and an index entry per
  16 rows). The largest binary on a
  machine is often a stripped Go binary (no `.eh_frame`, no
  `.debug_frame`): its rows come from `.gopclntab`'s SP deltas, and when
  they do not fit the budget its frames are walked by frame
  pointer.
- Daemon CPU goes to draining the maps (a few system calls per entry),
  symbolizing new addresses and encoding, and grows with how
  often windows are written; the 5 s windows here are 12 times more
  frequent than the default 60 s.
- Daemon memory: its RSS is its own heap (symbol caches, the window being
  built) and code, and the pages of the files the symbolizer is reading:
  those of a file kept parsed go back after each batch of lookups in it
  (62.6 MiB peak under `--all` before, 35.4 after). All its threads allocate from one glibc arena: with an
  arena per thread, each kept the pages it freed (64 MiB against 46 MiB
  peak under `--all` on 300 processes). The BPF maps are kernel memory beside it (section 4),
  most of it fixed at load: the unwind table budget
  (`--unwind-table-memory`) and the preallocated hash maps, two of each
  for the double-buffered windows. The daemon maps the unwind array only
  a table's window at a time while writing it; mapping all of it counted
  the 32 MB budget again in its RSS (65.9 MB before, against 50 MB).
- These machines are shared VMs: medians move by 10% or more between runs,
  so a slowdown within that band of 1.0 is not a measured cost.
";

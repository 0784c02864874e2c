//! Section 8: what the profiler costs processes it does not profile. A
//! getppid loop (the `syscalls` fixture, like `perf bench syscall basic`)
//! runs while the profiler targets an unrelated idle process, or every
//! process. Hooks that run per context switch leave it alone; a hook on
//! `sys_exit` slows every system call on the machine, which the
//! `--off-cpu-sys-exit` row and `perf stat` counting the tracepoint alone
//! (no BPF) show. Section 8b runs the ping-pong the same way: the
//! per-switch hooks do run for it, and should pass over it cheaply.
use std::{fmt::Write as _, process::Command};

use anyhow::Context as _;

use super::{
    overhead::{Measured, overhead, table},
    tools::{Config, baseline, profiler},
};

/// An idle process for the profiler to target, killed when dropped.
pub(super) struct Idle(std::process::Child);

impl Idle {
    pub(super) fn start() -> anyhow::Result<Self> {
        Command::new("sleep")
            .arg("100000")
            .spawn()
            .map(Self)
            .context("starting an idle `sleep` to profile")
    }

    pub(super) fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The measured rates per configuration; the first is the baseline, the
/// second `--pid` of an idle process, the third `--all`.
pub fn overhead_on_others(report: &mut String) -> anyhow::Result<Vec<Measured>> {
    let idle = Idle::start()?;
    let pid = idle.pid();
    let configs = vec![
        baseline(),
        profiler(
            "profiler --pid of an idle process (defaults)",
            &["--pid", &pid],
        ),
        profiler("profiler --all (defaults)", &["--all"]),
        profiler(
            "profiler --pid of an idle process --off-cpu-sys-exit",
            &["--pid", &pid, "--off-cpu-sys-exit"],
        ),
        Config {
            name: "perf stat -e raw_syscalls:sys_exit -a (tracepoint only, no BPF)",
            command: Some(
                ["perf", "stat", "-e", "raw_syscalls:sys_exit", "-a"]
                    .map(String::from)
                    .to_vec(),
            ),
            ready_marker: None,
        },
    ];
    let results = overhead("syscalls", "calls_per_sec", &configs)?;
    table(
        report,
        "8. System-call overhead on a process that is not profiled",
        "getppid calls/s",
        &results,
    )?;
    writeln!(
        report,
        "The workload is not a target: a profiler of one PID should leave the rest of the \
         machine alone. Off-CPU user stacks are taken by BPF task work, scheduled only for \
         kept intervals; `--off-cpu-sys-exit` (for kernels without task work) adds the \
         `sys_exit` hook, and enabling that tracepoint sends every system call of every task \
         down the slow path.\n"
    )?;
    Ok(results)
}

/// The ping-pong of section 1 while the profiler targets an unrelated idle
/// process: what the per-switch programs cost the rest of the machine.
/// Returns the rates; the first is the baseline, the second `--pid`.
pub fn switches_of_others(report: &mut String) -> anyhow::Result<Vec<Measured>> {
    let idle = Idle::start()?;
    let pid = idle.pid();
    let configs = vec![
        baseline(),
        profiler(
            "profiler --pid of an idle process (defaults)",
            &["--pid", &pid],
        ),
        profiler(
            "the same, off-CPU programs returning at once (the floor)",
            &["--pid", &pid, "--off-cpu-dispatch-only"],
        ),
    ];
    let results = overhead("pingpong", "round_trips_per_sec", &configs)?;
    table(
        report,
        "8b. Context-switch overhead on a process that is not profiled",
        "round trips/s",
        &results,
    )?;
    writeln!(
        report,
        "`sched_switch` runs for every thread on the machine (and, without task work, \
         `rseq_update` too). For a thread that is not profiled, `sched_switch` reads its ids \
         from the `task_struct` and one byte of the target filter: no helper call, no hash \
         lookup, so the cost over the floor is a few loads.\n"
    )?;
    Ok(results)
}

//! Section 8: what the profiler costs processes it does not profile. A
//! getppid loop (the `syscalls` fixture, like `perf bench syscall basic`)
//! runs while the profiler targets an unrelated idle process, or every
//! process. Hooks that run per context switch leave it alone; a hook on
//! `sys_exit` slows every system call on the machine, which the
//! `--off-cpu-sys-exit` row and `perf stat` counting the tracepoint alone
//! (no BPF) show.
use std::{fmt::Write as _, process::Command};

use anyhow::Context as _;

use super::{
    overhead::{overhead, table},
    tools::{Config, baseline, profiler},
};

/// The measured rates per configuration; the first is the baseline, the
/// second `--pid` of an idle process, the third `--all`.
pub fn overhead_on_others(report: &mut String) -> anyhow::Result<Vec<(String, Vec<f64>)>> {
    let mut idle = Command::new("sleep")
        .arg("100000")
        .spawn()
        .context("starting an idle `sleep` to profile")?;
    let pid = idle.id().to_string();
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
    let results = overhead("syscalls", "calls_per_sec", &configs);
    let _ = idle.kill();
    let _ = idle.wait();
    let results = results?;
    table(
        report,
        "8. System-call overhead on a process that is not profiled",
        "getppid calls/s",
        &results,
    )?;
    writeln!(
        report,
        "The workload is not a target: a profiler of one PID should leave the rest of the \
         machine alone. Off-CPU user stacks are taken at `rseq_update` (once per context \
         switch); `--off-cpu-sys-exit` adds the `sys_exit` hook, and enabling that tracepoint \
         sends every system call of every task down the slow path.\n"
    )?;
    Ok(results)
}

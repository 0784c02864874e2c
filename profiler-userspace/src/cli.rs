//! Command-line flags → a validated [`Config`]. The only module that sees clap.
use std::{
    ffi::OsString,
    net::{Ipv4Addr, SocketAddr},
    path::PathBuf,
    time::Duration,
};

use clap::{ArgGroup, CommandFactory as _, Parser, error::ErrorKind};

use profiler_common::{
    maps::{INTERVAL_CELLS_LEN, TARGET_COMMS_MAX_ENTRIES},
    off_cpu::MAX_RATE_NS,
};

use crate::config::{Config, Discover, Modes, OffCpu, Target, Unwind, UserStacks, WhatIf};

/// Where the kernel's sampling-rate ceiling is published.
pub const MAX_SAMPLE_RATE_PATH: &str = "/proc/sys/kernel/perf_event_max_sample_rate";

/// Wall-clock profiler: on-CPU stacks and off-CPU time (sleeping, disk,
/// run queue) with eBPF, written as a gzip'd pprof file every interval.
#[derive(Debug, Parser)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "one field per command-line switch"
)]
#[command(name = "profiler", version, about)]
#[command(group(ArgGroup::new("target").required(true).multiple(true).args(["pids", "all", "comms", "pid_files"])))]
#[command(group(ArgGroup::new("discovery").multiple(true).args(["comms", "pid_files"])))]
#[command(group(ArgGroup::new("wait_graph").multiple(true).args(["wakers", "goroutine_wakers"])))]
struct Args {
    /// Profile this process and all its threads (repeatable).
    #[arg(long = "pid", value_name = "PID")]
    pids: Vec<u32>,

    /// Profile every process on the system.
    #[arg(long, conflicts_with_all = ["pids", "comms", "pid_files"])]
    all: bool,

    /// Profile processes with this name (repeatable).
    #[arg(long = "comm", value_name = "NAME")]
    comms: Vec<String>,

    /// Profile the process whose id this file holds (repeatable).
    #[arg(long = "pid-file", value_name = "PATH")]
    pid_files: Vec<PathBuf>,

    /// Keep running when no --comm/--pid-file target is alive, and profile
    /// matching processes as they (re)start.
    #[arg(long, requires = "discovery")]
    wait: bool,

    /// Directory for the profile files (created if missing).
    #[arg(long, value_name = "DIR", default_value = "/var/lib/profiler")]
    output_dir: PathBuf,

    /// Length of one profile window, e.g. 500ms, 10s, 1m.
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = parse_duration)]
    interval: Duration,

    /// Stop after this long (default: run until SIGINT/SIGTERM).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    duration: Option<Duration>,

    /// On-CPU samples per second on each CPU.
    #[arg(long, value_name = "HZ", default_value_t = 99)]
    frequency: u64,

    /// Reads of each Go target's goroutines per second, for the goroutine
    /// view (`goroutine` sample type, `wall`); 0 turns it off.
    #[arg(long, value_name = "HZ", default_value_t = 99)]
    goroutine_frequency: u64,

    /// Keep only the newest N profile files.
    #[arg(long, value_name = "N", default_value_t = 100)]
    retain: usize,

    /// Off-CPU intervals shorter than this are kept with probability
    /// duration/rate and weighted up (unbiased); 0 keeps every interval.
    /// A thread's stacks are captured at most about 1/rate times a second:
    /// 100 at the default, as for on-CPU samples at 99 Hz.
    #[arg(long, value_name = "DUR", default_value = "10ms", value_parser = parse_duration)]
    off_cpu_rate: Duration,

    /// Do not track off-CPU time.
    #[arg(long)]
    no_off_cpu: bool,

    /// For kernels without BPF task work (before Linux 6.18, where every
    /// thread's off-CPU user stacks are exact already): hook every system
    /// call's exit instead, so that threads not registered with rseq (Go,
    /// static musl) get exact user stacks for waits in system calls. Slows
    /// every system call on the machine (BENCHMARKS.md).
    #[arg(long, conflicts_with = "no_off_cpu")]
    off_cpu_sys_exit: bool,

    /// Record who woke each kept off-CPU interval (its thread and stacks,
    /// or the interrupt: timer, disk, network): the `off_cpu_wakers`
    /// sample type, the blocked stack with the waker's above it.
    #[arg(long, conflicts_with = "no_off_cpu")]
    wakers: bool,

    /// Record which goroutine made each parked goroutine of a Go target
    /// runnable, and its stack: the `goroutine_wakers` sample type, the
    /// parked stack with the waker's above it. A uprobe on each Go
    /// binary's `runtime.ready`: a few microseconds per goroutine wakeup.
    #[arg(long)]
    goroutine_wakers: bool,

    /// With --wakers (threads) or --goroutine-wakers (goroutines):
    /// estimate in each window how much faster each thread or goroutine
    /// would make progress if FUNCTION took PERCENT less time (1 to 99),
    /// from who waited on whom (profile comments `what_if_N`).
    #[arg(long, value_name = "FUNCTION:PERCENT", requires = "wait_graph", value_parser = parse_what_if)]
    what_if: Option<WhatIf>,

    /// Do not take on-CPU samples.
    #[arg(long)]
    no_on_cpu: bool,

    /// How user stacks are walked: `table` (each binary's .eh_frame or
    /// .debug_frame, as perf --call-graph dwarf; needs no frame pointers)
    /// or `frame-pointer` (cheaper, no table memory, but callers of
    /// frameless code are lost, as with perf -g).
    #[arg(long, value_name = "HOW", default_value = "table")]
    unwind: UnwindFlag,

    /// Kernel memory for user-stack unwind tables, e.g. 32M, 256M, 1G
    /// [default: 32M]. Binaries whose table does not fit are walked by
    /// frame pointer and counted (tables_over_budget in each profile's
    /// comments).
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    unwind_table_memory: Option<u64>,

    #[command(flatten)]
    symbols: symbols::SymbolArgs,

    /// Serve profiles on demand (/debug/pprof/profile, offcpu, wall) and
    /// /metrics over HTTP on this address; a port alone binds loopback
    /// (8080 is 127.0.0.1:8080). Off by default.
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    listen: Option<SocketAddr>,

    #[command(flatten)]
    push: push::PushArgs,

    #[cfg(feature = "test-knobs")]
    #[command(flatten)]
    knobs: knobs::TestKnobs,
}

mod knobs;
mod push;
mod symbols;
mod values;

use values::{parse_duration, parse_size, parse_what_if};

/// The test knobs given.
#[cfg(feature = "test-knobs")]
fn knobs(args: &Args) -> knobs::TestKnobs {
    args.knobs.clone()
}

/// A product build's test knobs: their defaults.
#[cfg(not(feature = "test-knobs"))]
fn knobs(_: &Args) -> knobs::TestKnobs {
    knobs::TestKnobs::default()
}

/// `PORT` (loopback) or `HOST:PORT`.
fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    s.parse().map_err(|_| {
        format!(
            "{s:?} is not an address (expected a port such as 8080, or 127.0.0.1:8080, [::1]:8080)"
        )
    })
}

/// `--unwind`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum UnwindFlag {
    Table,
    FramePointer,
}

/// Default of `--unwind-table-memory`.
const DEFAULT_UNWIND_TABLE_MEMORY: u64 = 32 << 20;

/// Limits of the running kernel that flag values are checked against.
#[derive(Clone, Copy, Debug)]
pub struct KernelLimits {
    /// `kernel.perf_event_max_sample_rate`.
    pub max_sample_rate: u64,
}

impl KernelLimits {
    /// Reads the limits from procfs. A missing file means no perf events,
    /// which loading will report; here it imposes no ceiling.
    #[must_use]
    pub fn read() -> Self {
        let max_sample_rate = std::fs::read_to_string(MAX_SAMPLE_RATE_PATH)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(u64::MAX);
        Self { max_sample_rate }
    }
}

/// Parses and validates `args` (including the program name).
///
/// # Errors
/// A clap error, ready to print with [`clap::Error::exit`], for an unknown
/// or malformed flag and for values the daemon cannot run with.
pub fn parse<I, T>(args: I, limits: KernelLimits) -> Result<Config, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args = Args::try_parse_from(args)?;
    if args.frequency == 0 {
        return Err(invalid("--frequency must be at least 1 Hz".into()));
    }
    if args.frequency > limits.max_sample_rate {
        return Err(invalid(format!(
            "--frequency {} exceeds the kernel's limit of {} Hz ({MAX_SAMPLE_RATE_PATH})",
            args.frequency, limits.max_sample_rate
        )));
    }
    if args.goroutine_wakers && args.goroutine_frequency == 0 {
        return Err(invalid(
            "--goroutine-wakers needs the goroutine view (--goroutine-frequency above 0)".into(),
        ));
    }
    if args.goroutine_frequency > 1000 {
        return Err(invalid("--goroutine-frequency: at most 1000 Hz".into()));
    }
    if args.interval.is_zero() {
        return Err(invalid("--interval must be longer than 0".into()));
    }
    if args.duration.is_some_and(|d| d.is_zero()) {
        return Err(invalid("--duration must be longer than 0".into()));
    }
    if args.retain == 0 {
        return Err(invalid("--retain must keep at least 1 file".into()));
    }
    let modes = modes(&args)?;
    let unwind = unwind(args.unwind, args.unwind_table_memory)?;
    let symbols = args.symbols.config().map_err(invalid)?;
    let push = args.push.config().map_err(invalid)?;
    if args.comms.len() > TARGET_COMMS_MAX_ENTRIES as usize {
        return Err(invalid(format!(
            "at most {TARGET_COMMS_MAX_ENTRIES} --comm names (the kernel's table of names)"
        )));
    }
    if let Some(&pid) = args.pids.iter().find(|&&pid| pid == 0) {
        return Err(invalid(format!("--pid {pid}: not a process id")));
    }

    let target = if args.all {
        Target::All
    } else {
        let mut pids = args.pids;
        pids.sort_unstable();
        pids.dedup();
        Target::Pids(pids)
    };
    Ok(Config {
        target,
        output_dir: args.output_dir,
        interval: args.interval,
        duration: args.duration,
        frequency_hz: args.frequency,
        goroutine_hz: (args.goroutine_frequency > 0).then_some(args.goroutine_frequency),
        goroutine_wakers: args.goroutine_wakers,
        retain: args.retain,
        unwind,
        modes,
        discover: Discover {
            comms: args.comms,
            pid_files: args.pid_files,
            wait: args.wait,
        },
        symbols,
        listen: args.listen,
        push,
        what_if: args.what_if,
    })
}

/// `--no-on-cpu`, `--no-off-cpu` and the off-CPU flags as [`Modes`].
fn modes(args: &Args) -> Result<Modes, clap::Error> {
    let rate_ns = u64::try_from(args.off_cpu_rate.as_nanos()).unwrap_or(u64::MAX);
    if rate_ns > MAX_RATE_NS {
        return Err(invalid(format!(
            "--off-cpu-rate must be at most {:?}",
            Duration::from_nanos(MAX_RATE_NS)
        )));
    }
    let knobs = knobs(args);
    let cells = knobs.interval_cells;
    if !cells.is_power_of_two() || cells > INTERVAL_CELLS_LEN {
        return Err(invalid(format!(
            "--off-cpu-interval-cells must be a power of two, at most {INTERVAL_CELLS_LEN}"
        )));
    }
    let off_cpu = OffCpu {
        rate_ns,
        interval_cells: cells,
        naive_weights: knobs.naive_weights,
        dispatch_only: knobs.dispatch_only,
        user_stacks: match (args.off_cpu_sys_exit, knobs.no_task_work) {
            (true, _) => UserStacks::SysExit,
            (false, true) => UserStacks::Rseq,
            (false, false) => UserStacks::TaskWork,
        },
        wakers: args.wakers,
    };
    match (args.no_on_cpu, args.no_off_cpu) {
        (false, false) => Ok(Modes::Both(off_cpu)),
        (false, true) => Ok(Modes::OnCpu),
        (true, false) => Ok(Modes::OffCpu(off_cpu)),
        (true, true) => Err(invalid(
            "--no-off-cpu and --no-on-cpu together leave nothing to profile".into(),
        )),
    }
}

/// A validation error, printed as clap prints its own.
fn invalid(msg: String) -> clap::Error {
    Args::command().error(ErrorKind::ValueValidation, msg)
}

/// `--unwind` and `--unwind-table-memory` as an [`Unwind`].
fn unwind(how: UnwindFlag, memory: Option<u64>) -> Result<Unwind, clap::Error> {
    match how {
        UnwindFlag::FramePointer if memory.is_some() => Err(invalid(
            "--unwind-table-memory has no use with --unwind frame-pointer".into(),
        )),
        UnwindFlag::FramePointer => Ok(Unwind::FramePointers),
        UnwindFlag::Table => {
            let memory = memory.unwrap_or(DEFAULT_UNWIND_TABLE_MEMORY);
            // One row is 8 bytes; the kernel array holds at most 2^32 rows,
            // and less than a page of rows is no table at all.
            if !(64 << 10..=16 << 30).contains(&memory) {
                return Err(invalid(
                    "--unwind-table-memory must be between 64K and 16G".into(),
                ));
            }
            Ok(Unwind::Tables {
                rows: u32::try_from(memory / 8).unwrap_or(u32::MAX),
            })
        }
    }
}

#[cfg(test)]
mod tests;

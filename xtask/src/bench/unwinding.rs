//! The unwinder's costs for BENCHMARKS.md: the kernel time of a stack walk
//! by table against frame pointers only, in one run; and the time and
//! memory to build the tables of libc, the profiler and the largest binary
//! on the machine.
use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;
use profiler_fixtures::client::Fixture;

use super::{
    daemon_metrics::Metrics,
    kernel_cost::bpf_stats,
    overhead::field,
    tools::{RUN_SECS, attach, profiler, release},
};
use crate::workspace::workspace_root;

mod compiler;

use compiler::{COMPILER_FUNCTIONS, compiler_walk_cost};

/// The two ways the kernel can walk user stacks (`--unwind`).
const MODES: [(&str, &str); 2] = [
    ("tables", "table"),
    ("frame pointers only", "frame-pointer"),
];

/// What section 6 measured for the goals: `on_cpu_sample` with tables on
/// `deep.c`, in ns (NaN where a run gave none).
pub(super) struct WalkCosts {
    /// Per run, at the shallower depth (about 10 frames).
    pub ten_frames_ns: f64,
    /// Per frame, from the two depths' difference.
    pub per_frame_ns: f64,
}

/// Kernel time per run of the programs that walk user stacks, with tables
/// and with frame pointers only: on-CPU samples of a CPU-bound fixture at
/// 999 Hz, and off-CPU captures of the blocking fixture with every
/// interval kept (`--off-cpu-rate 0`, so each one walks a stack).
pub(super) fn kernel_costs(report: &mut String) -> anyhow::Result<WalkCosts> {
    writeln!(
        report,
        "## 6. Stack walk cost: tables against frame pointers\n"
    )?;
    writeln!(
        report,
        "run_time_ns / run_cnt (bpf_stats) of the programs that walk user stacks, for each `--unwind` mode in turn, with one copy of the fixture per CPU, a fixture that pins itself (`cpu_bound`) pinned to that CPU (every CPU's sampling event then fires in a target; with one copy, or two on one CPU, the runs on the other CPU, which stop at the target check, halved the average): `on_cpu_sample` under `cpu_bound` at 999 Hz (`--no-off-cpu`), and the off-CPU programs under `blockers` with `--off-cpu-rate 0` (every interval keeps a stack; as without task work, so that the walk runs at `rseq_update`, which bpf_stats sees). Frames per stack from the daemon's counters. The fixtures are release Rust without frame pointers, so frame pointers walk fewer frames, and wrong ones. The last rows are `on_cpu_sample` with tables on `deep.c` (plain `cc -O2` C) at two depths, and on the compiler proper of Debian's gcc (`cc1`, 25 MB of code, its table in cache no more than a build's is), one compile per CPU of a generated C file, from the compiles' start (their first samples walked before the daemon reads them).\n"
    )?;
    writeln!(
        report,
        "| mode | on_cpu_sample ns | frames per sample | sched_switch ns | rseq_update ns |"
    )?;
    writeln!(report, "| --- | --- | --- | --- | --- |")?;
    let per_run = |stats: &[(String, f64)], program: &str| {
        stats.iter().find(|(n, _)| n == program).map(|(_, ns)| *ns)
    };
    let show = |ns: Option<f64>| ns.map_or_else(|| "-".to_owned(), |ns| format!("{ns:.0}"));
    let on_cpu_args = |mode| ["--no-off-cpu", "--frequency", "999", "--unwind", mode];
    for (name, mode) in MODES {
        let (on_cpu, frames) = walk_cost(&fixture("cpu_bound", &[RUN_SECS]), &on_cpu_args(mode))?;
        let (off_cpu, _) = walk_cost(
            &fixture("blockers", &[RUN_SECS]),
            // At rseq_update, where bpf_stats sees the walk (it does not
            // see a task work callback).
            &[
                "--no-on-cpu",
                "--off-cpu-rate",
                "0",
                "--off-cpu-no-task-work",
                "--unwind",
                mode,
            ],
        )?;
        let sample_ns = per_run(&on_cpu, "on_cpu_sample");
        writeln!(
            report,
            "| {name} | {} | {frames:.1} | {} | {} |",
            show(sample_ns),
            show(per_run(&off_cpu, "sched_switch")),
            show(per_run(&off_cpu, "rseq_update")),
        )?;
    }
    // The same C program at two depths: the difference is the cost of
    // frames alone, in one small table (the rows above walk a large one).
    let mut deep = Vec::new();
    for levels in DEEP_LEVELS {
        let (on_cpu, frames) = walk_cost(&deep_stack(levels)?, &on_cpu_args("table"))?;
        let ns = per_run(&on_cpu, "on_cpu_sample");
        writeln!(
            report,
            "| tables, `deep.c` ({levels} levels, `cc -O2`) | {} | {frames:.1} | - | - |",
            show(ns)
        )?;
        deep.push(ns.map(|ns| (ns, frames)));
    }
    let (on_cpu, frames) = compiler_walk_cost()?;
    writeln!(
        report,
        "| tables, gcc's `cc1` compiling (`gcc -O2 -c`, {COMPILER_FUNCTIONS} functions, `--comm cc1`) | {} | {frames:.1} | - | - |",
        show(per_run(&on_cpu, "on_cpu_sample"))
    )?;
    writeln!(report)?;
    let mut costs = WalkCosts {
        ten_frames_ns: deep[0].map_or(f64::NAN, |(ns, _)| ns),
        per_frame_ns: f64::NAN,
    };
    if let [Some((ns0, frames0)), Some((ns1, frames1))] = deep[..] {
        costs.per_frame_ns = (ns1 - ns0) / (frames1 - frames0);
        writeln!(
            report,
            "Per frame with tables: {:.0} ns in `deep.c`'s small table (the difference of its two rows over their frames').\n",
            costs.per_frame_ns
        )?;
    }
    Ok(costs)
}

/// Recursion levels of the deep-stack rows: with `main` and libc's start
/// frames, about 10 and 60 frames.
const DEEP_LEVELS: [u32; 2] = [4, 54];

/// `fixture` from the release fixtures, with `args`.
fn fixture(name: &str, args: &[&str]) -> Command {
    let mut command = Command::new(release(name));
    command.args(args);
    command
}

/// `deep.c`, built with plain `cc -O2`, recursing `levels` deep.
pub(super) fn deep_stack(levels: u32) -> anyhow::Result<Command> {
    let dir = Path::new(super::tools::SCRATCH_DIR);
    fs::create_dir_all(dir)?;
    let program = dir.join("deep");
    crate::workspace::run(
        Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&program)
            .arg(workspace_root().join("profiler-fixtures/c/deep.c")),
    )?;
    let mut command = Command::new(program);
    command.args([RUN_SECS.to_owned(), levels.to_string()]);
    Ok(command)
}

/// Runs one copy of `fixture` per CPU under `profiler --pid` of them all
/// with `args`; returns the ns per run of each program and the native user
/// frames per on-CPU sample (from the daemon's `/metrics` counters).
///
/// One copy per CPU: the sampling event fires on every CPU, and on a CPU
/// running anything but a target the program stops at the target check:
/// with a single copy, such runs (about half of all on 2 CPUs) cut the
/// average to about half a target's sample (BENCHMARKS.md, section 6).
pub(super) fn walk_cost(
    fixture: &Command,
    args: &[&str],
) -> anyhow::Result<(Vec<(String, f64)>, f64)> {
    let (per_run, native, _) = walk_cost_with_runtime(fixture, args, "python_frames")?;
    Ok((per_run, native))
}

/// Kernel ns per run of each program that ran.
pub(super) type PerRun = Vec<(String, f64)>;

/// As [`walk_cost`], and a runtime's frames per on-CPU sample (its
/// counter: `python_frames`, `java_frames`).
pub(super) fn walk_cost_with_runtime(
    fixture: &Command,
    args: &[&str],
    runtime_frames: &str,
) -> anyhow::Result<(PerRun, f64, f64)> {
    let copies = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    // Each copy is told its CPU, for a fixture that pins itself
    // (`cpu_bound`): pinned to one, the other CPU's samples would find no
    // target and stop at the target check.
    let mut workloads = (0..copies)
        .map(|cpu| {
            let mut copy = copy_of(fixture);
            copy.env("PIN_CPU", cpu.to_string());
            Fixture::spawn(copy).context("starting the fixture")
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let metrics = Metrics::new()?;
    let pids: Vec<String> = workloads.iter().map(|w| w.pid().to_string()).collect();
    let mut all_args: Vec<&str> = pids.iter().flat_map(|pid| ["--pid", pid]).collect();
    all_args.extend(args);
    // 1 s windows: /metrics counts a window once it is written.
    all_args.extend(["--interval", "1s"]);
    all_args.extend(metrics.args());
    let attached = attach(&profiler("", &all_args), workloads[0].pid())?.context("profiler")?;
    let per_run = bpf_stats_over(|| {
        for workload in &mut workloads {
            workload.go()?;
        }
        for workload in &mut workloads {
            workload.result_line()?;
        }
        Ok(())
    })?;
    let scrape = metrics.scrape()?;
    attached.stop()?;
    Ok((
        per_run,
        scrape.native_frames_per_sample()?,
        scrape.per_on_cpu_sample(&[runtime_frames])?,
    ))
}

/// Kernel ns per run of each program that ran during `work`, from
/// bpf_stats turned on for it.
pub(super) fn bpf_stats_over(work: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<PerRun> {
    fs::write("/proc/sys/kernel/bpf_stats_enabled", "1")?;
    let before = bpf_stats()?;
    let worked = work();
    let after = bpf_stats();
    fs::write("/proc/sys/kernel/bpf_stats_enabled", "0")?;
    worked?;
    let mut per_run = Vec::new();
    for (name, (runs, ns)) in after? {
        let (runs0, ns0) = before
            .iter()
            .find(|(n, _)| *n == name)
            .map_or((0, 0), |(_, v)| *v);
        if runs > runs0 {
            #[expect(clippy::cast_precision_loss, reason = "an average")]
            per_run.push((name, (ns - ns0) as f64 / (runs - runs0) as f64));
        }
    }
    Ok(per_run)
}

/// Another command like `command`: its program, arguments, environment
/// and directory.
fn copy_of(command: &Command) -> Command {
    let mut copy = Command::new(command.get_program());
    copy.args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => copy.env(key, value),
            None => copy.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        copy.current_dir(dir);
    }
    copy
}

/// Time and kernel memory to build the tables of libc, the profiler and
/// the largest binary found on the machine.
pub(super) fn table_costs(report: &mut String) -> anyhow::Result<()> {
    writeln!(report, "## 7. Unwind table build time and size\n")?;
    writeln!(
        report,
        "Built by the daemon's own table builder (`profiler-userspace/examples/unwind_table_cost.rs`) from the file's bytes in memory; once per binary, shared by every process that maps it. Rows are 8 bytes of kernel memory (`--unwind-table-memory`, default 32M), plus an index entry of 8 bytes per 16 rows.\n"
    )?;
    writeln!(
        report,
        "| binary | file MB | build ms | rows | table MB | from |"
    )?;
    writeln!(report, "| --- | --- | --- | --- | --- | --- |")?;
    crate::workspace::cargo(&[
        "build",
        "--release",
        "--package",
        "profiler-userspace",
        "--example",
        "unwind_table_cost",
        "--features",
        crate::workspace::TEST_KNOBS,
    ])?;
    let mut binaries = vec![
        PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
        release("profiler"),
    ];
    binaries.extend(largest_elf());
    let out = Command::new(workspace_root().join("target/release/examples/unwind_table_cost"))
        .args(&binaries)
        .output()
        .context("unwind_table_cost")?;
    anyhow::ensure!(
        out.status.success(),
        "unwind_table_cost: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let path = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("path="))
            .unwrap_or("?");
        let source = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("source="))
            .unwrap_or("?");
        let mb = |key| field(line, key).unwrap_or(0.0) / 1e6;
        writeln!(
            report,
            "| `{path}` | {:.1} | {:.1} | {:.0} | {:.2} | `{source}` |",
            mb("file_bytes"),
            field(line, "build_ms").unwrap_or(0.0),
            field(line, "rows").unwrap_or(0.0),
            mb("table_bytes"),
        )?;
    }
    writeln!(report)?;
    Ok(())
}

/// The largest ELF file under the usual program and library directories
/// (and the Rust toolchains, which hold the biggest shared libraries on a
/// build machine).
fn largest_elf() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut roots: Vec<PathBuf> = ["/usr/bin", "/usr/lib", "/usr/local", "/opt"]
        .iter()
        .map(PathBuf::from)
        .collect();
    roots.extend(home.map(|h| h.join(".rustup/toolchains")));
    for root in roots {
        collect(&root, 6, &mut candidates);
    }
    candidates.sort_by_key(|(size, _)| std::cmp::Reverse(*size));
    candidates
        .into_iter()
        .map(|(_, path)| path)
        .find(|path| is_elf(path))
}

fn collect(dir: &Path, depth: u32, out: &mut Vec<(u64, PathBuf)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.is_dir() && depth > 0 {
            collect(&entry.path(), depth - 1, out);
        } else if meta.is_file() && meta.len() > 1 << 20 {
            out.push((meta.len(), entry.path()));
        }
    }
}

fn is_elf(path: &Path) -> bool {
    use std::io::Read as _;
    let mut magic = [0u8; 4];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == *b"\x7fELF")
}

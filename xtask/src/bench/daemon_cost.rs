//! Section 4: the daemon's own CPU and memory, and its time per window.
use std::{
    fmt::Write as _,
    process::{Child, Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use profiler_fixtures::backend::{Backend, Protocol};

use super::{
    daemon_metrics::Metrics,
    tools::{attach, profiler, workload},
};
use crate::procfs::{bpf_map_bytes, cpu_ticks, status_field};

/// What one mode of the daemon cost.
#[derive(Clone, Copy, Default)]
pub(super) struct Cost {
    /// CPU, in % of one core.
    pub cpu_pct: f64,
    /// Peak RSS.
    pub rss_bytes: u64,
    /// Kernel memory of its BPF maps.
    pub maps_bytes: u64,
}

/// The `--pid` and `--all` rows, for the goals.
pub(super) struct DaemonCost {
    pub pid: Cost,
    pub all: Cost,
}

/// How long the daemon runs with its workload before its CPU is measured:
/// the first windows read every binary's names and tables, once.
const WARM_UP: Duration = Duration::from_secs(10);

/// Processes on the host while this section measures (the goals' host).
const HOST_PROCESSES: usize = 300;

/// Idle processes (`sleep`) that make the host run [`HOST_PROCESSES`];
/// killed when dropped.
struct Crowd(Vec<Child>);

impl Crowd {
    fn up_to(total: usize) -> anyhow::Result<Self> {
        let running = std::fs::read_dir("/proc")?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
            .count();
        let children = (running..total)
            .map(|_| {
                Command::new("sleep")
                    .arg("3600")
                    .stdin(Stdio::null())
                    .spawn()
                    .context("sleep")
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Self(children))
    }
}

impl Drop for Crowd {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// CPU and memory of the daemon itself, and its time per window.
pub(super) fn daemon_cost(report: &mut String) -> anyhow::Result<DaemonCost> {
    let crowd = Crowd::up_to(HOST_PROCESSES)?;
    let mut costs = Vec::new();
    writeln!(report, "## 4. Daemon cost\n")?;
    writeln!(
        report,
        "The daemon's own CPU (utime + stime), in the first 10 s of the workload (its first windows: every binary's names and tables read) and in the 15 s after, and its peak RSS (VmHWM; beside it, how much of its RSS at the end is pages of mapped files, which the kernel can reclaim: binaries and debug files the symbolizer reads, and the daemon's own code), with 5 s windows (12 times as many windows as the default 60 s), while a 200-thread process (`many_threads`: each thread spins 100 µs and sleeps 20 ms) runs on a host of {HOST_PROCESSES} processes ({} idle `sleep`s started for it); with `--push` (to a fake Pyroscope on loopback that decodes and checks every request, at the default 15 s push interval), measured over 30 s, so that two pushes fall in it; the kernel memory of its BPF maps (the sum of `memlock` over their descriptors, at defaults: of it, 32 MiB is the unwind table budget `--unwind-table-memory`; README, \"Kernel memory\", gives each map's cost), which is not in its RSS; and the time per window to drain, symbolize and encode, from its `/metrics` (`profiler_window_step_seconds`).\n",
        crowd.0.len()
    )?;
    writeln!(
        report,
        "| mode | CPU, first 10 s (% of one core) | CPU, after (% of one core) | peak RSS (MiB) | of RSS at the end, mapped files (MiB) | BPF maps, kernel (MiB) | drain ms | symbolize ms | encode ms |"
    )?;
    writeln!(
        report,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )?;
    let backend = Backend::start(Protocol::Pyroscope);
    let spool = std::env::temp_dir().join(format!("profiler-bench-spool-{}", std::process::id()));
    let (url, spool_dir) = (backend.url(), spool.to_string_lossy().into_owned());
    let push = vec!["--all", "--push", &url, "--push-spool-dir", &spool_dir];
    for (mode, args, seconds) in [
        ("--pid (200 threads)", vec!["--pid", "{pid}"], 15),
        ("--all", vec!["--all"], 15),
        ("--all --push", push, 30),
    ] {
        let mut workload = workload(
            "many_threads",
            &[&(seconds + WARM_UP.as_secs() + 2).to_string()],
        )?;
        let metrics = Metrics::new()?;
        let mut args = args;
        args.extend(["--interval", "5s"]);
        args.extend(metrics.args());
        let config = profiler("", &args);
        let attached = attach(&config, workload.pid())?.context("profiler")?;
        let pid = attached.child.id();
        let start_ticks = cpu_ticks(pid)?;
        workload.go()?;
        sleep(WARM_UP);
        let ticks0 = cpu_ticks(pid)?;
        let started = Instant::now();
        sleep(Duration::from_secs(seconds));
        let ticks = cpu_ticks(pid)? - ticks0;
        let elapsed = started.elapsed().as_secs_f64();
        #[expect(clippy::cast_precision_loss, reason = "a percentage")]
        let warm_up_pct = (ticks0 - start_ticks) as f64 / 100.0 / WARM_UP.as_secs_f64() * 100.0;
        let hwm_kb = status_field(pid, "VmHWM")?;
        let file_pages_kb = status_field(pid, "RssFile")?;
        let map_bytes = bpf_map_bytes(pid)?;
        let scrape = metrics.scrape()?;
        attached.stop()?;
        drop(workload);
        #[expect(clippy::cast_precision_loss, reason = "a percentage")]
        let cpu_pct = ticks as f64 / 100.0 / elapsed * 100.0;
        #[expect(clippy::cast_precision_loss, reason = "megabytes")]
        let rss_mb = hwm_kb as f64 / 1024.0;
        #[expect(clippy::cast_precision_loss, reason = "megabytes")]
        let mapped_mb = file_pages_kb as f64 / 1024.0;
        #[expect(clippy::cast_precision_loss, reason = "megabytes")]
        let map_mb = map_bytes as f64 / 1024.0 / 1024.0;
        costs.push(Cost {
            cpu_pct,
            rss_bytes: hwm_kb * 1024,
            maps_bytes: map_bytes,
        });
        writeln!(
            report,
            "| {mode} | {warm_up_pct:.2} | {cpu_pct:.2} | {rss_mb:.1} | {mapped_mb:.1} | {map_mb:.1} | {:.2} | {:.2} | {:.2} |",
            scrape.mean_step_ms("drain")?,
            scrape.mean_step_ms("symbolize")?,
            scrape.mean_step_ms("encode")?
        )?;
    }
    let requests = backend.requests();
    let accepted = requests.iter().filter(|r| r.status == 200).count();
    writeln!(
        report,
        "\nWith `--push`, the fake backend took {accepted} of {} push requests.\n",
        requests.len()
    )?;
    for refused in requests.iter().filter_map(|r| r.decoded.as_ref().err()) {
        writeln!(report, "- refused: {refused}")?;
    }
    if accepted < requests.len() {
        writeln!(report)?;
    }
    let _ = std::fs::remove_dir_all(&spool);
    drop(crowd);
    match costs[..] {
        [pid, all, ..] => Ok(DaemonCost { pid, all }),
        _ => anyhow::bail!("no daemon measurement"),
    }
}

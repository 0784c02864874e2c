//! Section 4: the daemon's own CPU and memory, and its time per window.
use std::{
    fmt::Write as _,
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

/// CPU and memory of the daemon itself, and its time per window. Returns
/// (CPU %, peak RSS MB) of the `--pid` run.
pub(super) fn daemon_cost(report: &mut String) -> anyhow::Result<(f64, f64)> {
    let mut pid_mode = None;
    writeln!(report, "## 4. Daemon cost\n")?;
    writeln!(
        report,
        "The daemon's own CPU (utime + stime) and peak RSS (VmHWM) over 15 s with 5 s windows (12 times as many windows as the default 60 s), while a 200-thread process (`many_threads`: each thread spins 100 µs and sleeps 20 ms) runs; with `--push` (to a fake Pyroscope on loopback that decodes and checks every request, at the default 15 s push interval), over 30 s, so that two pushes fall in it; the kernel memory of its BPF maps (the sum of `memlock` over their descriptors, at defaults: of it, 32 MB is the unwind table budget `--unwind-table-memory`), which is not in its RSS; and the time per window to drain, symbolize and encode, from its `/metrics` (`profiler_window_step_seconds`).\n"
    )?;
    writeln!(
        report,
        "| mode | CPU (% of one core) | peak RSS (MB) | BPF maps, kernel (MB) | drain ms | symbolize ms | encode ms |"
    )?;
    writeln!(report, "| --- | --- | --- | --- | --- | --- | --- |")?;
    let backend = Backend::start(Protocol::Pyroscope);
    let spool = std::env::temp_dir().join(format!("profiler-bench-spool-{}", std::process::id()));
    let (url, spool_dir) = (backend.url(), spool.to_string_lossy().into_owned());
    let push = vec!["--all", "--push", &url, "--push-spool-dir", &spool_dir];
    for (mode, args, seconds) in [
        ("--pid (200 threads)", vec!["--pid", "{pid}"], 15),
        ("--all", vec!["--all"], 15),
        ("--all --push", push, 30),
    ] {
        let mut workload = workload("many_threads", &[&(seconds + 2).to_string()])?;
        let metrics = Metrics::new()?;
        let mut args = args;
        args.extend(["--interval", "5s"]);
        args.extend(metrics.args());
        let config = profiler("", &args);
        let attached = attach(&config, workload.pid())?.context("profiler")?;
        let pid = attached.child.id();
        let ticks0 = cpu_ticks(pid)?;
        let started = Instant::now();
        workload.go()?;
        sleep(Duration::from_secs(seconds));
        let ticks = cpu_ticks(pid)? - ticks0;
        let elapsed = started.elapsed().as_secs_f64();
        let hwm_kb = status_field(pid, "VmHWM")?;
        let map_bytes = bpf_map_bytes(pid)?;
        let scrape = metrics.scrape()?;
        attached.stop()?;
        drop(workload);
        #[expect(clippy::cast_precision_loss, reason = "a percentage")]
        let cpu_pct = ticks as f64 / 100.0 / elapsed * 100.0;
        #[expect(clippy::cast_precision_loss, reason = "megabytes")]
        let rss_mb = hwm_kb as f64 / 1024.0;
        #[expect(clippy::cast_precision_loss, reason = "megabytes")]
        let map_mb = map_bytes as f64 / 1024.0 / 1024.0;
        pid_mode.get_or_insert((cpu_pct, rss_mb));
        writeln!(
            report,
            "| {mode} | {cpu_pct:.2} | {rss_mb:.1} | {map_mb:.1} | {:.2} | {:.2} | {:.2} |",
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
    let _ = std::fs::remove_dir_all(&spool);
    pid_mode.context("no daemon measurement")
}

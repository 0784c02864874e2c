//! `cargo xtask soak [--minutes N]`: the daemon under a high context-switch
//! rate for N minutes (`profiler --all`, 60 s windows, while the ping-pong
//! fixture switches hundreds of thousands of times a second), sampling its
//! RSS every minute. Writes the figures into the soak section of
//! BENCHMARKS.md, which `cargo xtask bench` keeps.
use std::{
    fmt::Write as _,
    fs,
    process::{Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use profiler_fixtures::client::Fixture;

use crate::{
    procfs::{cpu_ticks, status_field},
    report::{BEGIN, END, replace_section},
    workspace::workspace_root,
};

pub fn run(minutes: u64) -> anyhow::Result<()> {
    crate::workspace::build_release_with_fixtures()?;
    let release = workspace_root().join("target/release");
    let out_dir = std::env::temp_dir().join("profiler-soak");
    let _ = fs::remove_dir_all(&out_dir);

    let mut pingpong = Command::new(release.join("pingpong"));
    pingpong.arg((minutes * 60 + 60).to_string());
    let mut workload = Fixture::spawn(pingpong).context("starting pingpong")?;

    let mut profiler = Command::new(release.join("profiler"))
        .args([
            "--all",
            "--interval",
            "60s",
            "--retain",
            "5",
            "--output-dir",
        ])
        .arg(&out_dir)
        .stderr(Stdio::null())
        .spawn()
        .context("starting profiler")?;
    sleep(Duration::from_secs(5));
    workload.go()?;

    let pid = profiler.id();
    let started = Instant::now();
    let mut rows = Vec::new();
    for minute in 0..=minutes {
        let at = started + Duration::from_secs(60 * minute);
        sleep(at.saturating_duration_since(Instant::now()));
        let rss = status_field(pid, "VmRSS")?;
        let hwm = status_field(pid, "VmHWM")?;
        let ticks = cpu_ticks(pid)?;
        eprintln!("soak: minute {minute}: RSS {rss} kB, peak {hwm} kB");
        rows.push((minute, rss, hwm, ticks));
    }
    crate::workspace::interrupt(pid)?;
    let status = profiler.wait()?;
    drop(workload);
    anyhow::ensure!(status.success(), "profiler exited with {status}");

    let mut section = String::new();
    writeln!(section, "{BEGIN}")?;
    writeln!(
        section,
        "## Soak: {minutes} minutes at a high context-switch rate\n"
    )?;
    writeln!(
        section,
        "`cargo xtask soak --minutes {minutes}`: `profiler --all` with 60 s windows while the \
         ping-pong fixture runs the whole time (hundreds of thousands of context switches a \
         second). The daemon's resident memory, sampled every minute, should stay flat.\n"
    )?;
    writeln!(
        section,
        "| minute | RSS (MB) | peak RSS (MB) | daemon CPU over the minute (% of a core) |"
    )?;
    writeln!(section, "| --- | --- | --- | --- |")?;
    let mut previous_ticks = None;
    for (minute, rss, hwm, ticks) in &rows {
        #[expect(clippy::cast_precision_loss, reason = "megabytes and percentages")]
        let (rss_mb, hwm_mb) = (*rss as f64 / 1024.0, *hwm as f64 / 1024.0);
        #[expect(clippy::cast_precision_loss, reason = "a percentage")]
        let cpu = previous_ticks.map_or(String::from("-"), |p: u64| {
            format!("{:.2}", (ticks - p) as f64 / 100.0 / 60.0 * 100.0)
        });
        writeln!(section, "| {minute} | {rss_mb:.1} | {hwm_mb:.1} | {cpu} |")?;
        previous_ticks = Some(*ticks);
    }
    writeln!(section, "{END}")?;

    let path = workspace_root().join("BENCHMARKS.md");
    let current = fs::read_to_string(&path).unwrap_or_default();
    fs::write(&path, replace_section(&current, &section))?;
    eprintln!("soak: wrote the soak section of {}", path.display());
    Ok(())
}

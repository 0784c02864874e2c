//! Section 16: a build host's new binaries. Thousands of distinct programs
//! (`distinct.c`, copied with a build id of its own each) run once each
//! under `--all`: the daemon's resident memory as they go, which the
//! bounds on its per-binary caches keep level (README, "The daemon's own
//! memory"): from the first 500, as issue 61's goal reads it, and from
//! 10,000 to 20,000, where it is level.
use std::{fmt::Write as _, process::Command, time::Duration};

use anyhow::{Context as _, bail};

use super::{
    daemon_metrics::Metrics,
    tools::{attach, profiler},
};
use crate::{
    procfs::{cpu_ticks, status_field},
    workspace::workspace_root,
};

/// Programs run, two at a time, each computing this many ms.
const PROGRAMS: usize = 20_000;
const WORK_MS: &str = "10";
/// RSS is read after this many programs, and at the end.
const MARKS: [usize; 7] = [500, 1_000, 2_000, 3_500, 5_000, 10_000, PROGRAMS];
/// The marks of issue 61's goal (after 5,000 over after 500), and of the
/// level (after 20,000 over after 10,000), by index in `MARKS`.
const GOAL: (usize, usize) = (0, 4);
const LEVEL: (usize, usize) = (5, 6);

/// The daemon's RSS, each once the window holding the programs so far is
/// written: over its first marks, and from then on.
pub(super) struct DistinctRss {
    /// After 5,000 programs over after 500.
    pub(super) goal: f64,
    /// After 20,000 over after 10,000.
    pub(super) level: f64,
}
/// The daemon's window, in seconds.
const INTERVAL_S: u64 = 10;
/// How long after a window is written its RSS is read: what the window's
/// end frees (and gives back to the kernel) is freed by then.
const SETTLE: Duration = Duration::from_secs(3);

/// The daemon's RSS at each mark, in MB.
#[derive(Default)]
struct Marks {
    /// As the mark's last program ends.
    running: Vec<f64>,
    /// Once the window holding the programs so far is written.
    written: Vec<f64>,
    /// `written`'s anonymous pages (heap, stacks).
    written_anon: Vec<f64>,
    /// `written`'s file pages (the daemon's own code and data).
    written_file: Vec<f64>,
    /// The daemon's CPU ticks and its symbolization's CPU seconds, at the
    /// first mark and at the last.
    cpu: Vec<(u64, f64)>,
}

impl Marks {
    /// The daemon's CPU per program from the first mark to the last, in
    /// µs: all of it, and its symbolization's.
    #[expect(clippy::cast_precision_loss, reason = "an average")]
    fn cpu_per_program_us(&self) -> (f64, f64) {
        let [(ticks0, symbolize0), .., (ticks1, symbolize1)] = self.cpu[..] else {
            return (f64::NAN, f64::NAN);
        };
        let programs = (MARKS[MARKS.len() - 1] - MARKS[0]) as f64;
        (
            (ticks1 - ticks0) as f64 * 1e4 / programs,
            (symbolize1 - symbolize0) * 1e6 / programs,
        )
    }
}

/// Writes section 16.
pub(super) fn distinct(report: &mut String) -> anyhow::Result<DistinctRss> {
    let dir = tempfile::tempdir()?;
    let bin = dir.path().join("distinct");
    let status = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&bin)
        .arg(workspace_root().join("profiler-fixtures/c/distinct.c"))
        .status()
        .context("cc")?;
    if !status.success() {
        bail!("cc distinct.c: {status}");
    }
    let copies = profiler_fixtures::distinct::copies(&bin, dir.path(), PROGRAMS)?;
    let interval = format!("{INTERVAL_S}s");
    let metrics = Metrics::new()?;
    let mut args = vec!["--all", "--interval", &interval];
    args.extend(metrics.args());
    let attached = attach(&profiler("", &args), 0)?.context("profiler")?;
    let pid = attached.child.id();
    #[expect(clippy::cast_precision_loss, reason = "megabytes")]
    let mb = |field| status_field(pid, field).map(|kb| kb as f64 / 1024.0);
    let mut marks = Marks::default();
    for (i, pair) in copies.chunks(2).enumerate() {
        let mut running = pair
            .iter()
            .map(|p| Command::new(p).arg(WORK_MS).spawn())
            .collect::<Result<Vec<_>, _>>()?;
        for child in &mut running {
            child.wait()?;
        }
        if MARKS.contains(&(2 * i + 2)) {
            marks.running.push(mb("VmRSS")?);
            metrics.end_window(pid)?;
            std::thread::sleep(SETTLE);
            marks.written.push(mb("VmRSS")?);
            marks.written_anon.push(mb("RssAnon")?);
            marks.written_file.push(mb("RssFile")?);
            let symbolize = metrics.scrape()?.cpu_seconds("symbolize")?;
            marks.cpu.push((cpu_ticks(pid)?, symbolize));
        }
    }
    #[expect(clippy::cast_precision_loss, reason = "megabytes")]
    let hwm_mb = status_field(pid, "VmHWM")? as f64 / 1024.0;
    attached.stop()?;
    write_section(report, &interval, &marks, hwm_mb)?;
    let ratio = |(from, to): (usize, usize)| marks.written[to] / marks.written[from];
    Ok(DistinctRss {
        goal: ratio(GOAL),
        level: ratio(LEVEL),
    })
}

fn write_section(
    report: &mut String,
    interval: &str,
    marks: &Marks,
    hwm_mb: f64,
) -> anyhow::Result<()> {
    writeln!(
        report,
        "\n## 16. A build host's new binaries: the daemon's memory\n\n\
         Under `profiler --all --interval {interval}`: {PROGRAMS} distinct programs run once \
         each, two at a time (`distinct.c` at `cc -O2`, computing {WORK_MS} ms; each copy has a \
         build id of its own, so every cache keyed by build id or file sees a new binary). The \
         daemon's RSS (VmRSS) after so many programs: as the last of them ends, and once the \
         window holding them is written (ended by SIGHUP, read {SETTLE:?} after), that split \
         into its anonymous pages (heap, stacks) and its file pages (its own code and data); \
         and its peak (VmHWM).\n"
    )?;
    let header: Vec<String> = MARKS.iter().map(|m| format!("after {m} (MB)")).collect();
    writeln!(report, "| RSS | {} | peak (MB) |", header.join(" | "))?;
    writeln!(report, "|---|{}", " --- |".repeat(MARKS.len() + 1))?;
    let row = |name: &str, mb: &[f64]| {
        let cells: Vec<String> = mb.iter().map(|mb| format!("{mb:.1}")).collect();
        format!("| {name} | {} |", cells.join(" | "))
    };
    writeln!(
        report,
        "{} {hwm_mb:.1} |",
        row("as they end", &marks.running)
    )?;
    writeln!(report, "{} |", row("their window written", &marks.written))?;
    writeln!(report, "{} |", row("of it anonymous", &marks.written_anon))?;
    writeln!(report, "{} |", row("of it file", &marks.written_file))?;
    let (all_us, symbolize_us) = marks.cpu_per_program_us();
    writeln!(
        report,
        "\nThe daemon's CPU per program from the first mark to the last (each a new binary): \
         {all_us:.0} µs, of which symbolization {symbolize_us:.0} µs.\n"
    )?;
    Ok(())
}

//! Section 16: a build host's new binaries. Thousands of distinct programs
//! (`distinct.c`, copied with a build id of its own each) run once each
//! under `--all`: the daemon's resident memory as they go, which the
//! bounds on its per-binary caches keep level (README, "The daemon's own
//! memory").
use std::{fmt::Write as _, process::Command, time::Duration};

use anyhow::{Context as _, bail};

use super::tools::{attach, profiler};
use crate::{procfs::status_field, workspace::workspace_root};

/// Programs run, two at a time, each computing this many ms.
const PROGRAMS: usize = 5_000;
const WORK_MS: &str = "10";
/// RSS is read after this many programs, and at the end.
const MARKS: [usize; 5] = [500, 1_000, 2_000, 3_500, PROGRAMS];
/// The daemon's window, in seconds.
const INTERVAL_S: u64 = 10;
/// How long the stream pauses at each mark: a window and a second, so that
/// the window holding the programs so far is written.
const SETTLE: Duration = Duration::from_secs(INTERVAL_S + 1);

/// Writes section 16; returns the RSS at the end over the RSS after the
/// first 500 programs, each read once the window holding them was written.
pub(super) fn distinct(report: &mut String) -> anyhow::Result<f64> {
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
    let config = profiler("", &["--all", "--interval", &interval]);
    let attached = attach(&config, 0)?.context("profiler")?;
    let pid = attached.child.id();
    #[expect(clippy::cast_precision_loss, reason = "megabytes")]
    let rss_mb = || status_field(pid, "VmRSS").map(|kb| kb as f64 / 1024.0);
    let (mut running_mb, mut settled_mb) = (Vec::new(), Vec::new());
    for (i, pair) in copies.chunks(2).enumerate() {
        let mut running = pair
            .iter()
            .map(|p| Command::new(p).arg(WORK_MS).spawn())
            .collect::<Result<Vec<_>, _>>()?;
        for child in &mut running {
            child.wait()?;
        }
        if MARKS.contains(&(2 * i + 2)) {
            running_mb.push(rss_mb()?);
            std::thread::sleep(SETTLE);
            settled_mb.push(rss_mb()?);
        }
    }
    #[expect(clippy::cast_precision_loss, reason = "megabytes")]
    let hwm_mb = status_field(pid, "VmHWM")? as f64 / 1024.0;
    attached.stop()?;
    writeln!(
        report,
        "\n## 16. A build host's new binaries: the daemon's memory\n\n\
         Under `profiler --all --interval {interval}`: {PROGRAMS} distinct programs run once \
         each, two at a time (`distinct.c` at `cc -O2`, computing {WORK_MS} ms; each copy has a \
         build id of its own, so every cache keyed by build id or file sees a new binary). The \
         daemon's RSS (VmRSS) after so many programs: as the last of them ends, and once the \
         window holding them is written (the stream pauses {SETTLE:?} at each mark); and its \
         peak (VmHWM).\n"
    )?;
    let header: Vec<String> = MARKS.iter().map(|m| format!("after {m} (MB)")).collect();
    writeln!(report, "| RSS | {} | peak (MB) |", header.join(" | "))?;
    writeln!(report, "|---|{}", " --- |".repeat(MARKS.len() + 1))?;
    let cells = |mb: &[f64]| mb.iter().map(|mb| format!("{mb:.1}")).collect::<Vec<_>>();
    writeln!(
        report,
        "| as they end | {} | {hwm_mb:.1} |",
        cells(&running_mb).join(" | ")
    )?;
    writeln!(
        report,
        "| their window written | {} | |",
        cells(&settled_mb).join(" | ")
    )?;
    Ok(settled_mb[MARKS.len() - 1] / settled_mb[0])
}

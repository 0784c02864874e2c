//! Section 9: symbolization time per window under `--all` on a busy
//! machine: cold (the daemon's first window, every binary new to it), warm
//! (the windows after), and with debuginfod serving the debug file of a
//! stripped program (downloaded in the background, then used).
use std::{
    fmt::Write as _,
    fs::{self, File},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread::sleep,
    time::Duration,
};

use anyhow::{Context as _, bail};
use profiler_fixtures::{client::Fixture, debuginfod};

use super::{
    daemon_metrics::{Metrics, Scrape},
    tools::{SCRATCH_DIR, attach, profiler_into},
};
use crate::workspace::workspace_root;

/// Background load that keeps both CPUs busy in several binaries (the
/// fixture is reaped by its own drop).
struct Load(Vec<Child>, Option<Fixture>);

impl Drop for Load {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub(super) fn symbolization(report: &mut String) -> anyhow::Result<()> {
    let dir = Path::new(SCRATCH_DIR).join("symbolization");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    let (program, debug_file) = stripped_natural(&dir)?;
    let served = dir.join("served");
    fs::create_dir_all(&served)?;
    fs::copy(&debug_file, served.join("natural.debug"))?;
    let _load = start_load(&program)?;

    writeln!(report, "## 9. Symbolization time per window\n")?;
    writeln!(
        report,
        "`--all` with 2 s windows, until four are written, while the machine is busy: `xz` and `gzip` compressing random data, and a stripped C program (`natural.c`, `cc -O2 -g`, debug information split off with `objcopy`). The first window is cold (every binary new to the daemon), the later ones warm; with debuginfod, a local server (Debian's `debuginfod`) serves the stripped program's debug file, fetched in the background. Times are the daemon's own symbolization step per window, from its `/metrics` (`profiler_window_step_seconds`), scraped after the first window and after the fourth.\n"
    )?;
    writeln!(
        report,
        "| run | first window (cold) ms | later windows, mean ms | debuginfod download ms |"
    )?;
    writeln!(report, "| --- | --- | --- | --- |")?;

    let times = run_profiler(&dir.join("local"), &[])?;
    row(report, "local files only", &times)?;

    let build_id = build_id(&program)?;
    let debuginfod = debuginfod::Server::start(&served, &dir.join("debuginfod.sqlite"), &build_id)?;
    let cache = dir.join("cache");
    let times = run_profiler(
        &dir.join("debuginfod"),
        &[
            "--debuginfod-url",
            debuginfod.url(),
            "--debuginfod-cache",
            cache.to_str().context("UTF-8 path")?,
        ],
    );
    drop(debuginfod);
    row(report, "with debuginfod (cold cache)", &times?)?;
    writeln!(report)?;
    Ok(())
}

/// A run's `/metrics`: after its first window, and after its fourth.
struct Times {
    first: Scrape,
    last: Scrape,
}

/// One table row: the cold window, the mean of the later ones, and the
/// debuginfod download time (if one finished).
fn row(report: &mut String, name: &str, times: &Times) -> anyhow::Result<()> {
    let (_, first) = times.first.step("symbolize")?;
    let (windows, total) = times.last.step("symbolize")?;
    let later = (total - first) / (windows - 1.0).max(1.0);
    let download = if times.last.counter("debuginfod_fetched").unwrap_or(0.0) > 0.0 {
        format!("{:.0}", times.last.counter("debuginfod_fetch_ms")?)
    } else {
        "-".to_owned()
    };
    writeln!(report, "| {name} | {first:.1} | {later:.1} | {download} |")?;
    Ok(())
}

/// Runs `profiler --all` in 2 s windows until it has written four;
/// returns its `/metrics` after the first and the fourth.
fn run_profiler(out: &Path, extra: &[&str]) -> anyhow::Result<Times> {
    let metrics = Metrics::new()?;
    let mut args = vec!["--all", "--interval", "2s"];
    args.extend_from_slice(extra);
    args.extend(metrics.args());
    let config = profiler_into("profiler --all", &args, out);
    let attached = attach(&config, 0)?.context("profiler")?;
    let first = scrape_after(&metrics, 1.0)?;
    let last = scrape_after(&metrics, 4.0)?;
    attached.stop()?;
    Ok(Times { first, last })
}

/// Polls `/metrics` until `windows` windows went through symbolization
/// (at most a minute).
fn scrape_after(metrics: &Metrics, windows: f64) -> anyhow::Result<Scrape> {
    for _ in 0..600 {
        if let Ok(scrape) = metrics.scrape()
            && scrape.step("symbolize").is_ok_and(|(n, _)| n >= windows)
        {
            return Ok(scrape);
        }
        sleep(Duration::from_millis(100));
    }
    bail!("the profiler did not finish {windows} windows in a minute")
}

/// The hex build id of an ELF file, as binutils' `readelf -n` prints it.
fn build_id(path: &Path) -> anyhow::Result<String> {
    let out = Command::new("readelf").arg("-n").arg(path).output()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| Some(l.trim().strip_prefix("Build ID:")?.trim().to_owned()))
        .with_context(|| format!("no build id in {}", path.display()))
}

/// Builds `natural.c` as a distribution would ship it: stripped, with a
/// separate debug file. Returns (program, debug file).
fn stripped_natural(dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let source = workspace_root().join("profiler-fixtures/c/natural.c");
    let full = dir.join("natural.full");
    let debug = dir.join("natural.debug");
    let program = dir.join("natural");
    crate::workspace::run(
        Command::new("cc")
            .args(["-O2", "-g", "-pthread", "-o"])
            .arg(&full)
            .arg(&source),
    )?;
    crate::workspace::run(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&full)
            .arg(&debug),
    )?;
    crate::workspace::run(
        Command::new("objcopy")
            .arg("--strip-all")
            .arg(&full)
            .arg(&program),
    )?;
    Ok((program, debug))
}

/// xz, gzip and the stripped program, all running until dropped. The
/// compressors read `/dev/urandom` themselves and are the children killed
/// on drop: a `head | xz` pipeline under `sh -c` outlived the shell that
/// was killed, and kept a CPU busy for hours after the bench.
fn start_load(program: &Path) -> anyhow::Result<Load> {
    let mut load = Load(Vec::new(), None);
    for compressor in [&["xz", "-T1", "-c"][..], &["gzip", "-c"][..]] {
        let random = File::open("/dev/urandom").context("opening /dev/urandom")?;
        load.0.push(
            Command::new(compressor[0])
                .args(&compressor[1..])
                .stdin(random)
                .stdout(Stdio::null())
                .spawn()
                .with_context(|| format!("starting {}", compressor.join(" ")))?,
        );
    }
    let mut command = Command::new(program);
    command.arg("600");
    let mut natural = Fixture::spawn(command).context("starting the stripped program")?;
    natural.go()?;
    load.1 = Some(natural);
    Ok(load)
}

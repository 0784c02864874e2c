//! Section 9: symbolization time per window under `--all` on a busy
//! machine: cold (the daemon's first window, every binary new to it), warm
//! (the windows after), and with debuginfod serving the debug file of a
//! stripped program (downloaded in the background, then used).
use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use profiler_fixtures::client::Fixture;

use super::{
    SCRATCH_DIR,
    daemon_cost::strip_ansi,
    overhead::field,
    tools::{attach, profiler_into},
};
use crate::workspace_root;

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
        "`--all` with 2 s windows for 9 s while the machine is busy: `xz` and `gzip` compressing random data, and a stripped C program (`natural.c`, `cc -O2 -g`, debug information split off with `objcopy`). The first window is cold (every binary new to the daemon), the later ones warm; with debuginfod, a local server (Debian's `debuginfod`) serves the stripped program's debug file, fetched in the background. Times are the daemon's own `symbolize_us` per window, from its log.\n"
    )?;
    writeln!(
        report,
        "| run | first window (cold) ms | later windows, mean ms | debuginfod download ms |"
    )?;
    writeln!(report, "| --- | --- | --- | --- |")?;

    let log = run_profiler(&dir.join("local"), &[])?;
    row(report, "local files only", &log)?;

    let mut debuginfod = start_debuginfod(&served, &dir.join("debuginfod.sqlite"))?;
    let cache = dir.join("cache");
    let log = run_profiler(
        &dir.join("debuginfod"),
        &[
            "--debuginfod-url",
            &debuginfod.1,
            "--debuginfod-cache",
            cache.to_str().context("UTF-8 path")?,
        ],
    );
    let _ = debuginfod.0.kill();
    let _ = debuginfod.0.wait();
    row(report, "with debuginfod (cold cache)", &log?)?;
    writeln!(report)?;
    Ok(())
}

/// One table row from a daemon log.
fn row(report: &mut String, name: &str, log: &str) -> anyhow::Result<()> {
    let windows: Vec<f64> = log
        .lines()
        .map(strip_ansi)
        .filter(|l| l.contains("wrote profile"))
        .filter_map(|l| field(&l, "symbolize_us"))
        .map(|us| us / 1000.0)
        .collect();
    let Some((first, later)) = windows.split_first() else {
        bail!("no windows in the log:\n{log}");
    };
    #[expect(clippy::cast_precision_loss, reason = "an average")]
    let mean = later.iter().sum::<f64>() / later.len().max(1) as f64;
    let download = log
        .lines()
        .map(strip_ansi)
        .filter(|l| l.contains("fetched debug file"))
        .find_map(|l| field(&l, "ms"))
        .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.0}"));
    writeln!(report, "| {name} | {first:.1} | {mean:.1} | {download} |")?;
    Ok(())
}

/// Runs `profiler --all` for 9 s in 2 s windows; returns its log.
fn run_profiler(out: &Path, extra: &[&str]) -> anyhow::Result<String> {
    let mut args = vec!["--all", "--interval", "2s", "--duration", "9s"];
    args.extend_from_slice(extra);
    let config = profiler_into("profiler --all", &args, out);
    let mut attached = attach(&config, 0)?.context("profiler")?;
    let status = attached.child.wait()?;
    let log = attached
        .output
        .take()
        .map(|o| o.join().unwrap_or_default())
        .unwrap_or_default();
    if !status.success() {
        bail!("profiler exited with {status}:\n{log}");
    }
    Ok(log)
}

/// Builds `natural.c` as a distribution would ship it: stripped, with a
/// separate debug file. Returns (program, debug file).
fn stripped_natural(dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let source = workspace_root().join("profiler-fixtures/c/natural.c");
    let full = dir.join("natural.full");
    let debug = dir.join("natural.debug");
    let program = dir.join("natural");
    crate::run(
        Command::new("cc")
            .args(["-O2", "-g", "-pthread", "-o"])
            .arg(&full)
            .arg(&source),
    )?;
    crate::run(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&full)
            .arg(&debug),
    )?;
    crate::run(
        Command::new("objcopy")
            .arg("--strip-all")
            .arg(&full)
            .arg(&program),
    )?;
    Ok((program, debug))
}

/// xz, gzip and the stripped program, all running until dropped.
fn start_load(program: &Path) -> anyhow::Result<Load> {
    let mut load = Load(Vec::new(), None);
    for pipeline in [
        "head -c 8G /dev/urandom | xz -T1 -c > /dev/null",
        "head -c 8G /dev/urandom | gzip -c > /dev/null",
    ] {
        load.0.push(
            Command::new("sh")
                .args(["-c", pipeline])
                .spawn()
                .with_context(|| format!("starting {pipeline}"))?,
        );
    }
    let mut command = Command::new(program);
    command.arg("600");
    let mut natural = Fixture::spawn(command).context("starting the stripped program")?;
    natural.go()?;
    load.1 = Some(natural);
    Ok(load)
}

/// Debian's debuginfod on a free loopback port, serving `dir`; returns it
/// and its URL once it serves what it indexed.
fn start_debuginfod(dir: &Path, db: &Path) -> anyhow::Result<(Child, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = Command::new("debuginfod")
        .args(["-p", &port.to_string(), "-F"])
        .arg(dir)
        .arg("-d")
        .arg(db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting debuginfod (Debian's debuginfod package)")?;
    let url = format!("http://127.0.0.1:{port}");
    // Its first scan of a one-file directory takes about a second; a file
    // asked for before that is "missing", which the table would show as no
    // download.
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > Duration::from_secs(30) {
            bail!("debuginfod did not start listening on {port}");
        }
        sleep(Duration::from_millis(200));
    }
    sleep(Duration::from_secs(5));
    Ok((child, url))
}

//! Starting the workloads (fixtures with the tests' protocol) and the
//! tools measured against them, and stopping the tools.
use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use std::os::unix::process::ExitStatusExt as _;

use anyhow::{Context as _, bail};
use profiler_fixtures::client::Fixture;

use crate::workspace::workspace_root;

/// Interleaved rounds of each configuration in sections 1 and 2.
pub(super) const ROUNDS: usize = 7;
/// Seconds each workload runs for one measurement.
pub(super) const RUN_SECS: &str = "3";
/// Where the bench keeps its profiles and scratch files.
pub(super) const SCRATCH_DIR: &str = "/tmp/profiler-bench";

pub(super) fn has(bin: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {bin}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// How long a tool runs before the workload starts. A tool is measured as
/// it runs for hours, not as it starts: the profiler's first look at its
/// target (reading its mappings, building the unwind tables of its
/// binaries) would otherwise fall into a 3 s run. In an interleaved A/B on
/// the ping-pong (6 rounds), starting at once instead of after 2 s added
/// about 1% to both the defaults and the floor. Tools without a ready
/// marker get the same wait in all.
const SETTLE: Duration = Duration::from_secs(2);

pub(super) fn release(bin: &str) -> PathBuf {
    workspace_root().join("target/release").join(bin)
}

/// A tool attached to the workload, `{pid}` standing for its pid.
pub(super) struct Config {
    pub(super) name: &'static str,
    /// None: the workload alone.
    pub(super) command: Option<Vec<String>>,
    /// What the tool prints when attached; None: wait [`SETTLE`] and
    /// assume it is.
    pub(super) ready_marker: Option<&'static str>,
}

/// The profiler with `args`, writing to the shared scratch directory and,
/// unless `args` says otherwise, one window per run.
pub(super) fn profiler(name: &'static str, args: &[&str]) -> Config {
    profiler_into(name, args, Path::new(SCRATCH_DIR))
}

pub(super) fn profiler_into(name: &'static str, args: &[&str], output_dir: &Path) -> Config {
    profiler_binary(&release("profiler"), name, args, output_dir)
}

/// As [`profiler_into`], for the profiler binary at `binary` (another
/// build, for `--against`).
pub(super) fn profiler_binary(
    binary: &Path,
    name: &'static str,
    args: &[&str],
    output_dir: &Path,
) -> Config {
    let mut command = vec![binary.display().to_string()];
    command.extend(args.iter().map(|a| (*a).to_owned()));
    command.extend(["--output-dir".to_owned(), output_dir.display().to_string()]);
    if !args.contains(&"--interval") {
        command.extend(["--interval".to_owned(), "60s".to_owned()]);
    }
    Config {
        name,
        command: Some(command),
        ready_marker: Some("profiling"),
    }
}

pub(super) fn baseline() -> Config {
    Config {
        name: "no profiler",
        command: None,
        ready_marker: None,
    }
}

/// Starts the release fixture `name` with `args`, ready and waiting for
/// "go" (through the protocol client the real-kernel tests use too).
pub(super) fn workload(name: &str, args: &[&str]) -> anyhow::Result<Fixture> {
    let mut command = Command::new(release(name));
    command.args(args);
    Fixture::spawn(command).with_context(|| format!("starting fixture {name}"))
}

/// Starts `workload`'s measured phase and waits for its result line.
pub(super) fn go_and_wait(workload: &mut Fixture) -> anyhow::Result<String> {
    workload.go()?;
    Ok(workload.result_line()?)
}

/// A tool running against a workload; killed if dropped unstopped, so a
/// failed run never leaves a tracer attached to the next one.
pub(super) struct Attached {
    pub(super) child: Child,
    pub(super) output: Option<std::thread::JoinHandle<String>>,
}

impl Drop for Attached {
    fn drop(&mut self) {
        if self.output.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(super) fn attach(config: &Config, pid: u32) -> anyhow::Result<Option<Attached>> {
    let Some(command) = &config.command else {
        return Ok(None);
    };
    let command: Vec<String> = command
        .iter()
        .map(|a| a.replace("{pid}", &pid.to_string()))
        .collect();
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {command:?}"))?;
    // The profiler logs to stderr, offcputime prints to stdout: watch both.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    for reader in [
        Box::new(child.stdout.take().context("stdout")?) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().context("stderr")?),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    drop(tx);
    let mut seen = String::new();
    if let Some(marker) = config.ready_marker {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .with_context(|| format!("{} did not start:\n{seen}", config.name))?;
            seen.push_str(&line);
            seen.push('\n');
            if line.contains(marker) {
                break;
            }
        }
    }
    sleep(SETTLE);
    let output = std::thread::spawn(move || {
        let mut all = seen;
        for line in rx {
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    Ok(Some(Attached {
        child,
        output: Some(output),
    }))
}

impl Attached {
    /// SIGINT, then the tool's output.
    pub(super) fn stop(mut self) -> anyhow::Result<String> {
        crate::workspace::interrupt(self.child.id())?;
        let status = self.child.wait()?;
        let output = self
            .output
            .take()
            .map(|o| o.join().unwrap_or_default())
            .unwrap_or_default();
        let interrupted = status.code() == Some(130) || status.signal() == Some(libc::SIGINT);
        if !status.success() && !interrupted {
            bail!("tool exited with {status}:\n{output}");
        }
        Ok(output)
    }
}

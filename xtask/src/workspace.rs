//! What every command of xtask shares: running cargo and other programs
//! in the workspace, the release build the bench and the soak measure,
//! and stopping a process they started.
use std::process::Command;

use anyhow::{Context as _, bail};

/// Runs cargo with `args` in the workspace root, failing on a non-zero exit.
pub fn cargo(args: &[&str]) -> anyhow::Result<()> {
    run(Command::new(env!("CARGO"))
        .args(args)
        .current_dir(workspace_root()))
}

pub fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

/// The cargo feature that gives the profiler the flags the tests
/// and the bench use (`profiler-userspace/src/cli/knobs.rs`).
pub const TEST_KNOBS: &str = "profiler-userspace/test-knobs";

/// The Go workload of the goroutine view's bench, as built into
/// `target/release/`.
pub const GO_FIXTURE: &str = "go_chanpingpong";

/// Builds the profiler (with the test knobs) and the fixture programs in
/// release mode, as the bench and the soak measure them.
pub fn build_release_with_fixtures() -> anyhow::Result<()> {
    cargo(&[
        "build",
        "--release",
        "--package",
        "profiler-userspace",
        "--package",
        "profiler-fixtures",
        "--features",
        TEST_KNOBS,
    ])?;
    // The Go workload of the goroutine view's bench, with Debian's Go.
    let root = workspace_root();
    run(Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(root.join("target/release").join(GO_FIXTURE))
        .arg(root.join("profiler-fixtures/go/chanpingpong.go"))
        .env("GOTOOLCHAIN", "local"))
    .context("go build chanpingpong.go (Debian's golang-go)")
}

/// Sends SIGINT to process `pid` (a tool or the profiler, to stop it).
pub fn interrupt(pid: u32) -> anyhow::Result<()> {
    signal(pid, libc::SIGINT, "SIGINT")
}

/// Sends SIGHUP to the profiler `pid`: it ends its window at once.
pub fn hang_up(pid: u32) -> anyhow::Result<()> {
    signal(pid, libc::SIGHUP, "SIGHUP")
}

fn signal(pid: u32, signal: libc::c_int, name: &str) -> anyhow::Result<()> {
    let pid = libc::pid_t::try_from(pid).context("process id out of range")?;
    // SAFETY: kill takes a pid and a signal number and touches no memory.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(std::io::Error::last_os_error()).context(format!("{name} to {pid}"));
    }
    Ok(())
}

/// The workspace's root directory.
pub fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_owned()
}

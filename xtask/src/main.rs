//! Project automation: `cargo xtask <setup|build|run|test|vm-test|bench|soak|install>`.
mod bench;
mod install;
mod procfs;
mod report;
mod setup;
mod soak;
mod test;
mod vm_test;

use std::process::Command;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install what building the eBPF programs needs (idempotent).
    Setup,
    /// Build the profiler (release).
    Build,
    /// Build, then run the profiler as root with these arguments.
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Every test: lints with warnings fatal, unit tests, real-kernel tests,
    /// then the VM suite on Debian 12's 6.1 (as `vm-test`).
    Test,
    /// The real-kernel suite's core on another kernel, booted under QEMU
    /// (TCG): Debian 12's 6.1 cloud kernel unless `--kernel` says which.
    VmTest {
        /// A kernel image (bzImage) to boot instead.
        #[arg(long, value_name = "PATH")]
        kernel: Option<std::path::PathBuf>,
    },
    /// Overhead and accuracy benchmarks; writes BENCHMARKS.md (needs root).
    Bench {
        /// Run only this section and print it, writing nothing: `kernel`
        /// (section 3, each program's kernel time), `daemon` (section 4, the
        /// daemon's CPU and memory, and start-up under `--all`),
        /// `unwinding` (sections 6 and 7, the stack walk's cost and table
        /// builds), `processes` (section 10, short processes: the kernel's
        /// cost of the records, the daemon's in a fork/exec storm),
        /// `goroutines` (section 11, the goroutine view's cost), `floor`
        /// (section 1b, the ping-pong at defaults over its floor, paired) or
        /// `syscalls` (section 8, system calls of a process not profiled).
        #[arg(long, value_name = "SECTION", value_parser = ["kernel", "daemon", "unwinding", "processes", "goroutines", "floor", "syscalls"])]
        only: Option<String>,
        /// Compare this tree's `sched_switch` program with the one of
        /// another build's profiler binary, both running at once, and print
        /// the difference per switch, writing nothing.
        #[arg(long, value_name = "PROFILER", conflicts_with = "only")]
        against: Option<std::path::PathBuf>,
    },
    /// The daemon under a high context-switch rate for a while; writes the
    /// soak section of BENCHMARKS.md (needs root).
    Soak {
        #[arg(long, default_value_t = 30)]
        minutes: u64,
    },
    /// Build (release) and install the binary, systemd unit and options file.
    Install {
        /// Installation prefix.
        #[arg(long, default_value = "/usr/local")]
        prefix: std::path::PathBuf,
        /// Stage everything under this directory (packaging).
        #[arg(long, default_value = "/")]
        destdir: std::path::PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Cmd::Setup => setup::run(),
        Cmd::Build => {
            setup::run()?;
            cargo(&["build", "--release", "--package", "profiler-userspace"])
        }
        Cmd::Run { args } => {
            setup::run()?;
            cargo(&["build", "--release", "--package", "profiler-userspace"])?;
            let status = Command::new(workspace_root().join("target/release/profiler"))
                .args(&args)
                .status()
                .context("starting target/release/profiler")?;
            if !status.success() {
                bail!("profiler exited with {status}");
            }
            Ok(())
        }
        Cmd::Test => {
            setup::run()?;
            test::run_all()?;
            vm_test::run(None)
        }
        Cmd::VmTest { kernel } => {
            setup::run()?;
            vm_test::run(kernel)
        }
        Cmd::Bench { only, against } => {
            setup::run()?;
            match (only.as_deref(), against) {
                (Some(section), _) => bench::run_only(section),
                (None, Some(other)) => bench::run_against(&other),
                (None, None) => bench::run(),
            }
        }
        Cmd::Soak { minutes } => {
            setup::run()?;
            soak::run(minutes)
        }
        Cmd::Install { prefix, destdir } => {
            setup::run()?;
            cargo(&["build", "--release", "--package", "profiler-userspace"])?;
            let binary = workspace_root().join("target/release/profiler");
            install::install(&binary, &prefix, &destdir).map(drop)
        }
    }
}

/// Runs cargo with `args` in the workspace root, failing on a non-zero exit.
fn cargo(args: &[&str]) -> anyhow::Result<()> {
    run(Command::new(env!("CARGO"))
        .args(args)
        .current_dir(workspace_root()))
}

fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

/// The cargo feature that gives the profiler the flags the tests
/// and the bench use (`profiler-userspace/src/cli/knobs.rs`).
const TEST_KNOBS: &str = "profiler-userspace/test-knobs";

/// Builds the profiler (with the test knobs) and the fixture programs in
/// release mode, as the bench and the soak measure them.
fn build_release_with_fixtures() -> anyhow::Result<()> {
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
        .arg(root.join("target/release").join(bench::GO_FIXTURE))
        .arg(root.join("profiler-fixtures/go/chanpingpong.go"))
        .env("GOTOOLCHAIN", "local"))
    .context("go build chanpingpong.go (Debian's golang-go)")
}

/// Sends SIGINT to process `pid` (a tool or the profiler, to stop it).
fn interrupt(pid: u32) -> anyhow::Result<()> {
    let pid = libc::pid_t::try_from(pid).context("process id out of range")?;
    // SAFETY: kill takes a pid and a signal number and touches no memory.
    if unsafe { libc::kill(pid, libc::SIGINT) } != 0 {
        return Err(std::io::Error::last_os_error()).context(format!("SIGINT to {pid}"));
    }
    Ok(())
}

fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_owned()
}

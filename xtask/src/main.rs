//! Project automation: `cargo xtask <setup|build|run|test|vm-test|bench|soak|install|deb>`.
mod bench;
mod deb;
#[cfg(test)]
mod deb_root;
mod install;
mod procfs;
mod report;
mod setup;
mod soak;
mod test;
mod vm_test;
mod workspace;

use std::process::Command;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use workspace::{cargo, workspace_root};

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
        /// `goroutines` (section 11, the goroutine view's cost),
        /// `containers` (section 14, fifty containers of short processes), `floor`
        /// (section 1b, the ping-pong at defaults over its floor, paired),
        /// `wakers` (section 3c, the same with `--wakers`, and each wakeup's
        /// kernel time) or `syscalls` (section 8, system calls of a process
        /// not profiled).
        #[arg(long, value_name = "SECTION", value_parser = ["kernel", "daemon", "unwinding", "processes", "goroutines", "python", "java", "containers", "floor", "wakers", "syscalls", "churn", "distinct"])]
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
    /// Build a Debian package (`target/deb/profiler_VERSION_ARCH.deb`):
    /// the release binary, the unit, the options file and the README.
    Deb {
        /// Package this binary instead of building the release one.
        #[arg(long, value_name = "PATH")]
        binary: Option<std::path::PathBuf>,
        /// Where the package goes.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<std::path::PathBuf>,
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
        Cmd::Deb { binary, out_dir } => {
            let binary = if let Some(binary) = binary {
                binary
            } else {
                setup::run()?;
                cargo(&["build", "--release", "--package", "profiler-userspace"])?;
                workspace_root().join("target/release/profiler")
            };
            let out_dir = out_dir.unwrap_or_else(|| workspace_root().join("target/deb"));
            deb::build(&binary, &out_dir).map(drop)
        }
    }
}

//! `cargo xtask test`: formatting, clippy with warnings fatal (userspace
//! and, separately, the eBPF crate on its own target), then every test.
//! Real-kernel tests load BPF, so they need root and run one at a time.
//! `main` then runs the VM suite (`vm_test.rs`) on Debian 12's 6.1.
use std::process::Command;

use crate::workspace::{TEST_KNOBS, cargo, run, workspace_root};

pub fn run_all() -> anyhow::Result<()> {
    cargo(&["fmt", "--all", "--", "--check"])?;
    cargo(&[
        "clippy",
        "--workspace",
        "--exclude",
        "profiler-ebpf",
        "--all-targets",
        "--features",
        TEST_KNOBS,
        "--",
        "-D",
        "warnings",
    ])?;
    // The eBPF crate as the product builds it, and with the test knobs.
    for features in [&[][..], &["--features", "test-knobs"]] {
        run(Command::new("rustup")
            .env_remove("RUSTUP_TOOLCHAIN")
            .env_remove("RUSTC")
            .args(["run", "nightly", "cargo", "clippy", "--release"])
            .args(features)
            .args([
                "--target",
                "bpfel-unknown-none",
                "-Z",
                "build-std=core",
                "--",
                "-D",
                "warnings",
            ])
            .current_dir(workspace_root().join("profiler-ebpf")))?;
    }
    // The fixture programs the real-kernel tests profile, and the daemon
    // as users run it, for the tests whose measure depends on its speed.
    cargo(&["build", "--package", "profiler-fixtures"])?;
    cargo(&[
        "build",
        "--release",
        "--package",
        "profiler-userspace",
        "--bin",
        "profiler",
    ])?;
    // A product build refuses the test knobs, its eBPF object has none of
    // their globals, and its programs' frames fit Linux 6.1's stack.
    cargo(&[
        "test",
        "--package",
        "profiler-userspace",
        "--lib",
        "--",
        "cli::",
        "bpf::contract_tests::",
        "bpf::stack_tests::",
    ])?;
    cargo(&[
        "test",
        "--workspace",
        "--exclude",
        "profiler-ebpf",
        "--features",
        TEST_KNOBS,
        "--",
        "--test-threads=1",
    ])
}

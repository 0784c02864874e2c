//! Builds the eBPF programs from source (profiler-ebpf) on every build, with
//! the nightly toolchain and bpf-linker that `cargo xtask setup` installs.
use anyhow::{Context as _, anyhow};
use aya_build::{Package, Toolchain};

fn main() -> anyhow::Result<()> {
    let manifest_dir = std::path::PathBuf::from(
        std::env::var("CARGO_MANIFEST_DIR").context("CARGO_MANIFEST_DIR not set")?,
    );
    // The eBPF crate sits next to this one in the workspace.
    let ebpf_dir = manifest_dir
        .parent()
        .ok_or_else(|| anyhow!("no workspace root above {}", manifest_dir.display()))?
        .join("profiler-ebpf");
    let ebpf_dir = ebpf_dir.to_str().ok_or_else(|| anyhow!("non-UTF-8 path"))?;
    // The test knobs' globals only in a build with the test knobs.
    let features: &[&str] = if std::env::var_os("CARGO_FEATURE_TEST_KNOBS").is_some() {
        &["test-knobs"]
    } else {
        &[]
    };
    aya_build::build_ebpf(
        [Package {
            name: "profiler-ebpf",
            root_dir: ebpf_dir,
            features,
            ..Package::default()
        }],
        Toolchain::default(),
    )
}

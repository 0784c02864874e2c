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
    // aya-build passes every line the eBPF crate's cargo prints on as a
    // warning of this crate (about 40 `Compiling ...` lines per build):
    // quiet, that cargo prints only what went wrong.
    // SAFETY: a build script is single-threaded here; nothing else reads
    // the environment concurrently.
    unsafe { std::env::set_var("CARGO_TERM_QUIET", "true") };
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

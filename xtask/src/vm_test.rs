//! `cargo xtask vm-test [--kernel PATH]`: the real-kernel suite's core on
//! another kernel, booted under QEMU's TCG (`profiler-userspace/tests/
//! vm_kernel.rs`). By default the kernel is Debian 12's 6.1 cloud kernel,
//! fetched from Debian's packages into `target/vm-kernel/` the first time
//! (`apt-get download`, unpacked with `dpkg-deb`; nothing is installed).
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::workspace::workspace_root;

/// Builds what the VM runs, then runs the suite against `kernel` (Debian
/// 12's 6.1 when `None`).
pub fn run(kernel: Option<PathBuf>) -> anyhow::Result<()> {
    let kernel = match kernel {
        Some(kernel) => kernel,
        None => debian_kernel()?,
    };
    if !kernel.is_file() {
        bail!("no kernel image at {}", kernel.display());
    }
    crate::workspace::build_release_with_fixtures()?;
    eprintln!("xtask: booting {} under QEMU (TCG)", kernel.display());
    crate::workspace::run(
        Command::new(env!("CARGO"))
            .args([
                "test",
                "--package",
                "profiler-userspace",
                "--test",
                "vm_kernel",
                "--",
                "--ignored",
                "--test-threads=1",
            ])
            .env("PROFILER_VM_KERNEL", &kernel)
            .current_dir(workspace_root()),
    )
}

/// Debian 12's newest 6.1 cloud kernel image, fetched once into
/// `target/vm-kernel/`.
fn debian_kernel() -> anyhow::Result<PathBuf> {
    let dir = workspace_root().join("target/vm-kernel");
    if let Some(image) = kernel_in(&dir)? {
        return Ok(image);
    }
    let package = newest_cloud_kernel_package()?;
    eprintln!("xtask: fetching {package} into {}", dir.display());
    let partial = workspace_root().join("target/.vm-kernel.partial");
    let _ = fs::remove_dir_all(&partial);
    fs::create_dir_all(&partial)?;
    crate::workspace::run(
        Command::new("apt-get")
            .args(["download", "-q", &package])
            .current_dir(&partial),
    )
    .context("fetching the VM kernel from Debian's packages (apt-get download)")?;
    let deb = fs::read_dir(&partial)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .context("apt-get download left no .deb")?;
    crate::workspace::run(
        Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(partial.join("root")),
    )?;
    let image = kernel_in(&partial.join("root/boot"))?.context("no vmlinuz in the package")?;
    let name = image.file_name().context("kernel file name")?.to_owned();
    fs::create_dir_all(&dir)?;
    fs::rename(&image, dir.join(&name))?;
    let _ = fs::remove_dir_all(&partial);
    Ok(dir.join(name))
}

/// The `vmlinuz-*` in `dir`, if any.
fn kernel_in(dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    if !dir.exists() {
        return Ok(None);
    }
    Ok(fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        }))
}

/// `linux-image-6.1.0-N-cloud-amd64-unsigned` with the highest `N` that
/// apt knows.
fn newest_cloud_kernel_package() -> anyhow::Result<String> {
    let out = Command::new("apt-cache")
        .args([
            "search",
            "--names-only",
            r"^linux-image-6\.1\.0-[0-9]+-cloud-amd64-unsigned$",
        ])
        .output()
        .context("apt-cache (the VM kernel comes from Debian's packages)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|line| line.split_whitespace().next())
        .max_by_key(|name| {
            name.trim_start_matches("linux-image-6.1.0-")
                .split('-')
                .next()
                .and_then(|n| n.parse::<u32>().ok())
        })
        .map(str::to_owned)
        .context("no linux-image-6.1.0-*-cloud-amd64-unsigned package (run apt-get update)")
}

//! A clean Debian 12 root to install the package into: made once with
//! `debootstrap` (minbase and systemd, from Debian's mirror) under
//! `target/debian-root/`, and used through an overlay, so every install
//! starts from the same untouched root.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use crate::workspace::{run, workspace_root};

/// The cached root, made on first use.
fn cached_root() -> anyhow::Result<PathBuf> {
    let dir = workspace_root().join("target/debian-root");
    let root = dir.join("bookworm");
    if root.join("usr/bin/systemd-analyze").exists() {
        return Ok(root);
    }
    let partial = dir.join("bookworm.partial");
    let _ = fs::remove_dir_all(&partial);
    fs::create_dir_all(&dir)?;
    eprintln!(
        "xtask: debootstrap of Debian 12 (minbase, systemd) into {}",
        partial.display()
    );
    run(Command::new("debootstrap")
        .args(["--variant=minbase", "--include=systemd", "bookworm"])
        .arg(&partial)
        .arg("http://deb.debian.org/debian")
        .stdout(std::process::Stdio::null()))
    .context("debootstrap (apt install debootstrap; .ci/run does)")?;
    fs::rename(&partial, &root)?;
    Ok(root)
}

/// A throwaway copy of the clean root: an overlay mounted over it,
/// unmounted and gone on drop.
pub struct Scratch {
    merged: PathBuf,
    _dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> anyhow::Result<Self> {
        let lower = cached_root()?;
        let dir = tempfile::tempdir()?;
        let [upper, work, merged] = ["upper", "work", "merged"].map(|d| dir.path().join(d));
        for d in [&upper, &work, &merged] {
            fs::create_dir_all(d)?;
        }
        run(Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o"])
            .arg(format!(
                "lowerdir={},upperdir={},workdir={}",
                lower.display(),
                upper.display(),
                work.display()
            ))
            .arg(&merged))?;
        Ok(Self { merged, _dir: dir })
    }

    /// The root's directory, as seen from the host.
    pub fn path(&self) -> &Path {
        &self.merged
    }

    /// Runs `args` chrooted into the root: its stdout.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new("chroot")
            .arg(&self.merged)
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .output()
            .with_context(|| format!("chroot {args:?}"))?;
        if !out.status.success() {
            bail!(
                "{args:?} in the Debian root: {}\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.merged).status();
    }
}

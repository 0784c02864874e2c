//! `cargo xtask deb [--binary PATH] [--out-dir DIR]`: a Debian package of
//! the release binary, the systemd unit, its options file (a conffile) and
//! the README, laid out by `install.rs` under `/usr`, with the maintainer
//! scripts and control file of `packaging/deb/`, built by Debian's own
//! `dpkg-deb`; its dependencies are what `dpkg-shlibdeps` finds the binary
//! links. `deb_root.rs` checks it installs in a clean Debian root.
use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail, ensure};

use crate::{install, workspace::workspace_root};

/// The maintainer scripts, installed executable.
const SCRIPTS: [&str; 3] = ["postinst", "prerm", "postrm"];

/// Builds the package of `binary` into `out_dir`; returns its path.
pub fn build(binary: &Path, out_dir: &Path) -> anyhow::Result<PathBuf> {
    let stage = tempfile::tempdir().context("a staging directory")?;
    let root = stage.path().join("root");
    install::install(binary, Path::new("/usr"), &root)?;
    let packaging = workspace_root().join("packaging/deb");
    copy(
        &packaging.join("copyright"),
        &root.join("usr/share/doc/profiler/copyright"),
        0o644,
    )?;
    let control_dir = root.join("DEBIAN");
    for script in SCRIPTS {
        copy(&packaging.join(script), &control_dir.join(script), 0o755)?;
    }
    copy(
        &packaging.join("conffiles"),
        &control_dir.join("conffiles"),
        0o644,
    )?;
    let arch = output(Command::new("dpkg").arg("--print-architecture"))?;
    let mut control = fs::read_to_string(packaging.join("control"))?;
    for (placeholder, value) in [
        ("@VERSION@", env!("CARGO_PKG_VERSION").to_owned()),
        ("@ARCH@", arch.clone()),
        ("@DEPENDS@", depends(stage.path(), &root)?),
        ("@INSTALLED_SIZE@", kib_under(&root)?.to_string()),
    ] {
        ensure!(
            control.contains(placeholder),
            "{placeholder} not in the control file"
        );
        control = control.replace(placeholder, &value);
    }
    fs::write(control_dir.join("control"), control)?;

    fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let deb = out_dir.join(format!("profiler_{}_{arch}.deb", env!("CARGO_PKG_VERSION")));
    // Built beside, then renamed: a failed build leaves no package.
    let partial = stage.path().join("profiler.deb");
    let status = Command::new("dpkg-deb")
        .args(["--root-owner-group", "--build"])
        .arg(&root)
        .arg(&partial)
        .stdout(std::process::Stdio::null())
        .status()
        .context("dpkg-deb (Debian's dpkg)")?;
    if !status.success() {
        bail!("dpkg-deb --build {} failed: {status}", root.display());
    }
    // Into the output directory beside it first (the stage may be on
    // another file system), then renamed over it whole.
    let beside = deb.with_extension("deb.partial");
    fs::copy(&partial, &beside).with_context(|| format!("writing {}", beside.display()))?;
    fs::rename(&beside, &deb).with_context(|| format!("writing {}", deb.display()))?;
    eprintln!("xtask: built {}", deb.display());
    Ok(deb)
}

/// The packages the staged binary's shared libraries come from, with
/// the versions its symbols need (`dpkg-shlibdeps`, which reads a
/// `debian/control` beside the tree it is run in).
fn depends(stage: &Path, root: &Path) -> anyhow::Result<String> {
    fs::create_dir_all(stage.join("debian"))?;
    fs::write(
        stage.join("debian/control"),
        "Source: profiler\n\nPackage: profiler\nArchitecture: any\n",
    )?;
    let line = output(
        Command::new("dpkg-shlibdeps")
            .args(["-O", "-e"])
            .arg(root.join("usr/bin/profiler"))
            .current_dir(stage),
    )
    .context("dpkg-shlibdeps (Debian's dpkg-dev)")?;
    let depends = line
        .lines()
        .find_map(|l| l.strip_prefix("shlibs:Depends="))
        .with_context(|| format!("no shlibs:Depends in {line:?}"))?;
    Ok(depends.to_owned())
}

/// The tree's size in KiB, as `Installed-Size` counts it (the control
/// directory left out).
fn kib_under(dir: &Path) -> anyhow::Result<u64> {
    let mut bytes = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name() == "DEBIAN" {
            continue;
        }
        let meta = entry.metadata()?;
        bytes += if meta.is_dir() {
            kib_under(&entry.path())? * 1024
        } else {
            meta.len().div_ceil(1024) * 1024
        };
    }
    Ok(bytes / 1024)
}

fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("starting {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

fn copy(from: &Path, to: &Path, mode: u32) -> anyhow::Result<()> {
    fs::create_dir_all(to.parent().context("no parent directory")?)?;
    fs::copy(from, to).with_context(|| format!("copying {}", from.display()))?;
    fs::set_permissions(to, fs::Permissions::from_mode(mode))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deb_root::Scratch;

    /// The package of the profiler `cargo test` built (the release
    /// binary's stand-in: the same libraries; the same unit and files),
    /// installed
    /// as the README says into a clean Debian 12 root: the binary runs,
    /// systemd accepts the unit there, the options file is a conffile that
    /// a purge removes, and nothing is left behind.
    #[test]
    fn the_package_installs_runs_and_purges_in_a_clean_debian_root() {
        let binary = workspace_root().join("target/debug/profiler");
        assert!(
            binary.exists(),
            "{} is built by `cargo test --workspace` (cargo xtask test runs it)",
            binary.display()
        );
        let out = tempfile::tempdir().unwrap();
        // Without its debug sections (170 MB: xz took 42 s over them).
        let stripped = out.path().join("profiler");
        output(
            Command::new("objcopy")
                .arg("--strip-debug")
                .arg(&binary)
                .arg(&stripped),
        )
        .unwrap();
        let deb = build(&stripped, out.path()).unwrap();
        let fields = output(Command::new("dpkg-deb").arg("--field").arg(&deb)).unwrap();
        assert!(fields.contains("Depends: libc6 (>= "), "{fields}");
        let contents = output(Command::new("dpkg-deb").arg("--contents").arg(&deb)).unwrap();
        for path in [
            "./usr/bin/profiler",
            "./usr/lib/systemd/system/profiler.service",
            "./etc/default/profiler",
            "./usr/share/doc/profiler/README.md",
            "./usr/share/doc/profiler/copyright",
        ] {
            assert!(contents.contains(path), "{path} missing:\n{contents}");
        }

        let root = Scratch::new().unwrap();
        fs::copy(&deb, root.path().join("tmp/profiler.deb")).unwrap();
        root.run(&["apt-get", "install", "-y", "-q", "/tmp/profiler.deb"])
            .unwrap();
        let version = root.run(&["profiler", "--version"]).unwrap();
        assert!(
            version.starts_with(&format!("profiler {}", env!("CARGO_PKG_VERSION"))),
            "{version}"
        );
        let unit = fs::read_to_string(root.path().join("usr/lib/systemd/system/profiler.service"))
            .unwrap();
        assert!(unit.contains("ExecStart=/usr/bin/profiler "), "{unit}");
        let verify = Command::new("chroot")
            .arg(root.path())
            .args(["systemd-analyze", "verify", "profiler.service"])
            .output()
            .unwrap();
        assert!(
            verify.status.success() && verify.stdout.is_empty() && verify.stderr.is_empty(),
            "systemd-analyze verify in the root: {}{}",
            String::from_utf8_lossy(&verify.stdout),
            String::from_utf8_lossy(&verify.stderr)
        );
        let conffiles = root
            .run(&["dpkg-query", "-W", "-f=${Conffiles}", "profiler"])
            .unwrap();
        assert!(conffiles.contains("/etc/default/profiler"), "{conffiles}");

        root.run(&["apt-get", "purge", "-y", "-q", "profiler"])
            .unwrap();
        for gone in [
            "usr/bin/profiler",
            "etc/default/profiler",
            "usr/share/doc/profiler",
        ] {
            assert!(!root.path().join(gone).exists(), "{gone} left after purge");
        }
    }
}

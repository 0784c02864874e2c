//! `cargo xtask install [--prefix P] [--destdir D]`: the release binary,
//! the systemd unit (with its paths filled in), the options file and the
//! README, laid out as a package would.
use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
};

use anyhow::Context as _;

use crate::workspace::workspace_root;

/// Where everything goes for `prefix`, inside `destdir`.
struct Layout {
    bin: PathBuf,
    unit: PathBuf,
    doc: PathBuf,
    config: PathBuf,
}

impl Layout {
    fn new(prefix: &Path, destdir: &Path) -> Self {
        // `prefix` is absolute; joining it would replace `destdir`.
        let under = |path: &Path| destdir.join(path.strip_prefix("/").unwrap_or(path));
        Self {
            bin: under(&prefix.join("bin")),
            unit: under(&prefix.join("lib/systemd/system")),
            doc: under(&prefix.join("share/doc/profiler")),
            config: under(Path::new("/etc/default")),
        }
    }
}

/// Installs `binary` and the packaging files; returns what it wrote.
pub fn install(binary: &Path, prefix: &Path, destdir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    anyhow::ensure!(
        prefix.is_absolute(),
        "--prefix must be absolute: {}",
        prefix.display()
    );
    let layout = Layout::new(prefix, destdir);
    let packaging = workspace_root().join("packaging");
    let mut written = Vec::new();

    let bin = layout.bin.join("profiler");
    copy(binary, &bin, 0o755)?;
    written.push(bin);

    let unit = fs::read_to_string(packaging.join("profiler.service"))?
        .replace("@BINDIR@", &prefix.join("bin").display().to_string())
        .replace(
            "@DOCDIR@",
            &prefix.join("share/doc/profiler").display().to_string(),
        );
    let unit_path = layout.unit.join("profiler.service");
    write(&unit_path, unit.as_bytes(), 0o644)?;
    written.push(unit_path);

    let readme = layout.doc.join("README.md");
    copy(&workspace_root().join("README.md"), &readme, 0o644)?;
    written.push(readme);

    // Never overwrite an administrator's options.
    let config = layout.config.join("profiler");
    if config.exists() {
        eprintln!("xtask: keeping the existing {}", config.display());
    } else {
        copy(&packaging.join("profiler.default"), &config, 0o644)?;
        written.push(config);
    }
    Ok(written)
}

fn copy(from: &Path, to: &Path, mode: u32) -> anyhow::Result<()> {
    let bytes = fs::read(from).with_context(|| format!("reading {}", from.display()))?;
    write(to, &bytes, mode)
}

fn write(to: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    let dir = to.parent().context("no parent directory")?;
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // Write beside, then rename: a running binary is replaced, not rewritten.
    let tmp = to.with_extension("xtask-tmp");
    fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
    fs::rename(&tmp, to).with_context(|| format!("installing {}", to.display()))?;
    eprintln!("xtask: installed {}", to.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    #[test]
    fn installs_into_a_destdir_and_systemd_accepts_the_unit() {
        let destdir = tempfile::tempdir().unwrap();
        // Any executable stands in for the release build here.
        let written = install(
            Path::new("/bin/true"),
            Path::new("/usr/local"),
            destdir.path(),
        )
        .unwrap();
        let root = destdir.path();
        let bin = root.join("usr/local/bin/profiler");
        let unit = root.join("usr/local/lib/systemd/system/profiler.service");
        for (path, mode) in [
            (&bin, 0o755),
            (&unit, 0o644),
            (&root.join("usr/local/share/doc/profiler/README.md"), 0o644),
            (&root.join("etc/default/profiler"), 0o644),
        ] {
            assert!(written.contains(path), "{} not installed", path.display());
            assert_eq!(
                fs::metadata(path).unwrap().permissions().mode() & 0o777,
                mode
            );
        }
        let text = fs::read_to_string(&unit).unwrap();
        assert!(
            text.contains("ExecStart=/usr/local/bin/profiler $PROFILER_TARGET"),
            "{text}"
        );
        assert!(!text.contains('@'), "placeholders left: {text}");

        // verify also checks that ExecStart's binary exists: point it at
        // the staged one (a whole --root lacks systemd's own units).
        let staged = root.join("profiler.service");
        fs::write(
            &staged,
            text.replace("/usr/local/bin/profiler", &bin.display().to_string()),
        )
        .unwrap();
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&staged)
            .output()
            .expect("systemd-analyze (Debian's systemd package) is needed");
        // It exits 0 on settings it ignores, so any output is a failure too.
        assert!(
            out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
            "systemd-analyze verify: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );

        // A second install keeps the administrator's options.
        fs::write(
            root.join("etc/default/profiler"),
            "PROFILER_TARGET=--pid 1\n",
        )
        .unwrap();
        install(Path::new("/bin/true"), Path::new("/usr/local"), root).unwrap();
        let options = fs::read_to_string(root.join("etc/default/profiler")).unwrap();
        assert_eq!(options, "PROFILER_TARGET=--pid 1\n");
    }

    #[test]
    fn relative_prefix_is_refused() {
        let destdir = tempfile::tempdir().unwrap();
        assert!(install(Path::new("/bin/true"), Path::new("usr"), destdir.path()).is_err());
    }
}

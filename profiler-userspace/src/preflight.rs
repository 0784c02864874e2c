//! Checks the machine and the configuration before anything is loaded, so
//! bad input fails with a clear message and leaves nothing behind.
use std::{
    fs,
    io::{self, Write as _},
    os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
};

use crate::{
    bpf::{BtfFieldError, KernelTypes, features},
    config::{Config, Discover, Target},
    process::procfs,
    targets,
};

/// Where the kernel publishes its own BTF.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error(
        "missing capability {missing}: run as root, or grant CAP_BPF and CAP_PERFMON \
         (e.g. AmbientCapabilities= in a systemd unit)"
    )]
    MissingCapability { missing: &'static str },
    #[error("reading this process's capabilities from /proc/self/status")]
    Capabilities(#[source] io::Error),
    #[error("no kernel BTF at {VMLINUX_BTF}: the kernel needs CONFIG_DEBUG_INFO_BTF=y")]
    NoBtf(#[source] io::Error),
    #[error("reading the kernel's BTF")]
    KernelTypes(#[source] BtfFieldError),
    #[error("this kernel ({release}) lacks {what}: the profiler needs Linux {since} or later")]
    KernelLacks {
        what: &'static str,
        since: &'static str,
        release: String,
    },
    #[error("--pid {0}: no such process")]
    NoSuchProcess(u32),
    #[error("no running process matches {0} (add --wait to wait for one)")]
    NoMatch(String),
    #[error("--pid {tid}: that is a thread of process {pid}; pass the process id")]
    ThreadNotProcess { tid: u32, pid: u32 },
    #[error("creating the output directory {path}")]
    OutputDirCreate { path: PathBuf, source: io::Error },
    #[error("the output directory {path} is not a directory")]
    OutputDirNotDir { path: PathBuf },
    #[error("writing a file in the output directory {path}")]
    OutputDirWrite { path: PathBuf, source: io::Error },
    #[error("creating the debuginfod cache directory {path}")]
    DebuginfodCache { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Push(#[from] crate::output::push::PushError),
}

/// A capability by number, as in `linux/capability.h`.
#[derive(Clone, Copy)]
struct Capability {
    bit: u32,
    name: &'static str,
}

const CAP_SYS_ADMIN: Capability = Capability {
    bit: 21,
    name: "CAP_SYS_ADMIN",
};
const CAP_PERFMON: Capability = Capability {
    bit: 38,
    name: "CAP_PERFMON",
};
const CAP_BPF: Capability = Capability {
    bit: 39,
    name: "CAP_BPF",
};
const CAP_SYS_PTRACE: Capability = Capability {
    bit: 19,
    name: "CAP_SYS_PTRACE",
};

/// Runs every check in the order a user would want to fix them.
///
/// # Errors
/// The first check that fails.
pub fn check(config: &Config) -> Result<(), PreflightError> {
    check_capabilities()?;
    fs::File::open(VMLINUX_BTF).map_err(PreflightError::NoBtf)?;
    check_kernel_features()?;
    if let Target::Pids(pids) = &config.target {
        for &pid in pids {
            check_process(pid)?;
        }
        let discover = &config.discover;
        if pids.is_empty() && !discover.wait && targets::find(discover).is_empty() {
            return Err(PreflightError::NoMatch(describe(discover)));
        }
    }
    if let Some(push) = &config.push {
        crate::output::push::check(push)?;
    }
    if let Some(debuginfod) = &config.symbols.debuginfod {
        fs::create_dir_all(&debuginfod.cache_dir).map_err(|source| {
            PreflightError::DebuginfodCache {
                path: debuginfod.cache_dir.clone(),
                source,
            }
        })?;
    }
    prepare_output_dir(&config.output_dir)
}

/// The kernel's BTF must show every feature the programs need.
fn check_kernel_features() -> Result<(), PreflightError> {
    let types = KernelTypes::from_sys_fs().map_err(PreflightError::KernelTypes)?;
    match features::missing(&types) {
        Some(feature) => Err(PreflightError::KernelLacks {
            what: feature.what,
            since: feature.since,
            release: procfs::kernel_release(),
        }),
        None => Ok(()),
    }
}

/// `--comm a --pid-file b`, as the user wrote it.
fn describe(discover: &Discover) -> String {
    let comms = discover.comms.iter().map(|c| format!("--comm {c}"));
    let files = discover
        .pid_files
        .iter()
        .map(|f| format!("--pid-file {}", f.display()));
    comms.chain(files).collect::<Vec<_>>().join(" ")
}

fn check_capabilities() -> Result<(), PreflightError> {
    let status = fs::read_to_string("/proc/self/status").map_err(PreflightError::Capabilities)?;
    let effective = parse_cap_eff(&status).ok_or_else(|| {
        PreflightError::Capabilities(io::Error::new(io::ErrorKind::InvalidData, "no CapEff line"))
    })?;
    missing_capability(effective).map_or(Ok(()), |missing| {
        Err(PreflightError::MissingCapability { missing })
    })?;
    if effective & (1 << CAP_SYS_PTRACE.bit) == 0 {
        tracing::warn!(
            "{} is missing: stacks of other users' processes will not symbolize",
            CAP_SYS_PTRACE.name
        );
    }
    Ok(())
}

/// The effective capability set from `/proc/<pid>/status`.
fn parse_cap_eff(status: &str) -> Option<u64> {
    let hex = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// The first capability loading and attaching needs that `effective` lacks.
/// `CAP_SYS_ADMIN` stands in for both on its own.
fn missing_capability(effective: u64) -> Option<&'static str> {
    let has = |cap: Capability| effective & (1 << cap.bit) != 0;
    if has(CAP_SYS_ADMIN) {
        return None;
    }
    [CAP_BPF, CAP_PERFMON]
        .into_iter()
        .find(|&cap| !has(cap))
        .map(|cap| cap.name)
}

fn check_process(pid: u32) -> Result<(), PreflightError> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|_| PreflightError::NoSuchProcess(pid))?;
    let tgid = status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse::<u32>().ok())
        .ok_or(PreflightError::NoSuchProcess(pid))?;
    if tgid == pid {
        Ok(())
    } else {
        Err(PreflightError::ThreadNotProcess {
            tid: pid,
            pid: tgid,
        })
    }
}

/// Creates the directory (mode 0750) and proves a file can be written in it.
fn prepare_output_dir(path: &Path) -> Result<(), PreflightError> {
    let path_buf = || path.to_owned();
    if path.exists() && !path.is_dir() {
        return Err(PreflightError::OutputDirNotDir { path: path_buf() });
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(path)
        .map_err(|source| PreflightError::OutputDirCreate {
            path: path_buf(),
            source,
        })?;
    let probe = path.join(format!(".profiler-write-test-{}", std::process::id()));
    let result = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&probe)
        .and_then(|mut file| file.write_all(b"ok"));
    let _ = fs::remove_file(&probe);
    result.map_err(|source| PreflightError::OutputDirWrite {
        path: path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_eff_is_parsed() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(parse_cap_eff(status), Some(0x1ff_ffff_ffff));
        assert_eq!(parse_cap_eff("Name: x\n"), None);
    }

    #[test]
    fn capabilities_needed() {
        assert_eq!(missing_capability(0), Some("CAP_BPF"));
        assert_eq!(missing_capability(1 << CAP_BPF.bit), Some("CAP_PERFMON"));
        assert_eq!(
            missing_capability((1 << CAP_BPF.bit) | (1 << CAP_PERFMON.bit)),
            None
        );
        assert_eq!(missing_capability(1 << CAP_SYS_ADMIN.bit), None);
    }

    #[test]
    fn output_dir_is_created_and_probed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        prepare_output_dir(&dir).unwrap();
        assert!(dir.is_dir());
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            0,
            "probe file left behind"
        );
        let file = tmp.path().join("file");
        fs::write(&file, b"").unwrap();
        assert!(matches!(
            prepare_output_dir(&file.join("sub")),
            Err(PreflightError::OutputDirCreate { .. })
        ));
        assert!(matches!(
            prepare_output_dir(&file),
            Err(PreflightError::OutputDirNotDir { .. })
        ));
    }

    #[test]
    fn process_checks() {
        check_process(std::process::id()).unwrap();
        assert!(matches!(
            check_process(u32::MAX - 1),
            Err(PreflightError::NoSuchProcess(_))
        ));
    }
}

//! What can fail on the kernel side, and the two map chores every part
//! of it shares: taking its maps out of the loaded object, and removing an
//! entry that may be gone already.
use aya::{EbpfError, maps::MapError, programs::ProgramError};

use super::{btf_fields::BtfFieldError, kfunc};

/// A failure of the kernel side; the message names the operation, the
/// source (if any) the cause.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("loading the eBPF object")]
    Load(#[from] EbpfError),
    #[error("loading eBPF program {name}")]
    LoadProgram {
        name: &'static str,
        source: ProgramError,
    },
    #[error("attaching eBPF program {name}")]
    AttachProgram {
        name: &'static str,
        source: ProgramError,
    },
    #[error("attaching {name} to CPU {cpu}")]
    Attach {
        name: &'static str,
        cpu: u32,
        source: ProgramError,
    },
    #[error("eBPF program {name} is not of the kind the daemon expects")]
    ProgramKind {
        name: &'static str,
        source: ProgramError,
    },
    #[error("eBPF map {name}")]
    Map {
        name: &'static str,
        source: MapError,
    },
    #[error("eBPF map {name}")]
    MapIo {
        name: &'static str,
        source: std::io::Error,
    },
    #[error("eBPF map {name} is not of the type the daemon expects")]
    MapType { name: &'static str },
    #[error("eBPF map {0} is full")]
    MapFull(&'static str),
    #[error("opening a pidfd for a thread")]
    Pidfd(#[source] std::io::Error),
    #[error("eBPF object has no map named {0}")]
    MissingMap(&'static str),
    #[error("eBPF object has no program named {0}")]
    MissingProgram(&'static str),
    #[error("mapping the unwind table array into memory")]
    MapRows(#[source] std::io::Error),
    #[error("linking the eBPF object's kernel function calls")]
    Kfuncs(#[source] kfunc::KfuncError),
    #[error("reading the kernel's BTF")]
    Btf(#[source] aya::BtfError),
    #[error("finding the scheduler fields off-CPU profiling reads (--no-off-cpu does without)")]
    SchedFields(#[source] BtfFieldError),
    #[error("listing online CPUs from {path}")]
    Cpus {
        path: &'static str,
        source: std::io::Error,
    },
}

impl KernelError {
    pub(super) fn map(name: &'static str) -> impl FnOnce(MapError) -> Self {
        move |source| Self::Map { name, source }
    }

    pub(super) fn map_io(name: &'static str) -> impl FnOnce(std::io::Error) -> Self {
        move |source| Self::MapIo { name, source }
    }
}

/// The result of removing a map entry, with an entry already gone taken as
/// removed: aya reports that as `KeyNotFound`, or as the syscall's ENOENT.
pub(super) fn removed(result: Result<(), MapError>) -> Result<(), MapError> {
    match result {
        Err(MapError::KeyNotFound) => Ok(()),
        Err(MapError::SyscallError(e)) if e.io_error.kind() == std::io::ErrorKind::NotFound => {
            Ok(())
        }
        other => other,
    }
}

/// Takes map `name` out of the loaded object, for the part that owns it.
pub(super) fn take_map(
    ebpf: &mut aya::Ebpf,
    name: &'static str,
) -> Result<aya::maps::Map, KernelError> {
    ebpf.take_map(name).ok_or(KernelError::MissingMap(name))
}

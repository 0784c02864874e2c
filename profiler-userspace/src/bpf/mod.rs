//! The kernel side as seen from userspace: load and attach the eBPF
//! programs (`load.rs`), change their target set (`targets.rs`), then
//! drain their maps window by window (`drain.rs`), account the intervals
//! still open at a window's end (`in_flight.rs`, with the sampling rule's
//! random source in `rng.rs`),
//! find the scheduler fields the off-CPU programs read (`btf_fields.rs`),
//! probe the kernel for what the programs need (`features.rs`),
//! link its kfunc calls (`kfunc.rs`), serve the unwinder's maps
//! (`unwind_maps.rs`) and copy the programs' log into tracing
//! (`ebpf_log.rs`). Only this module touches aya types.
//!
//! The rest of the daemon uses the kernel through narrow interfaces:
//! [`WindowMaps`], [`InFlightMaps`], [`TargetMaps`] and [`UnwindMaps`].
//! [`KernelMaps`] is all four, as the daemon's window loop uses them.
//! [`Kernel`] implements each against the loaded programs; `in_memory.rs`
//! implements them in memory, for tests that run without root.
mod asleep;
mod batch;
mod btf_fields;
#[cfg(test)]
mod contract_tests;
mod doorbell;
mod drain;
mod ebpf_log;
pub mod features;
mod handshake;
mod in_flight;
#[cfg(test)]
pub mod in_memory;
mod kfunc;
mod load;
mod rng;
mod targets;
mod task_storage;
mod tracked_thread;
mod unwind_maps;

pub use btf_fields::{BtfFieldError, KernelTypes};
pub use doorbell::Doorbell;
pub use drain::{Drained, Flip, WindowMaps};
pub use in_flight::{InFlightMaps, InFlightStats};
pub use load::Kernel;
pub use rng::Rng;
pub use targets::TargetMaps;
pub use unwind_maps::UnwindMaps;

use aya::{EbpfError, maps::MapError, programs::ProgramError};

/// Every map the daemon's window loop uses.
pub trait KernelMaps:
    WindowMaps + InFlightMaps + TargetMaps + UnwindMaps<Error = KernelError>
{
}

impl<T> KernelMaps for T where
    T: WindowMaps + InFlightMaps + TargetMaps + UnwindMaps<Error = KernelError>
{
}

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
    fn map(name: &'static str) -> impl FnOnce(MapError) -> Self {
        move |source| Self::Map { name, source }
    }

    fn map_io(name: &'static str) -> impl FnOnce(std::io::Error) -> Self {
        move |source| Self::MapIo { name, source }
    }
}

/// The result of removing a map entry, with an entry already gone taken as
/// removed: aya reports that as `KeyNotFound`, or as the syscall's ENOENT.
fn removed(result: Result<(), MapError>) -> Result<(), MapError> {
    match result {
        Err(MapError::KeyNotFound) => Ok(()),
        Err(MapError::SyscallError(e)) if e.io_error.kind() == std::io::ErrorKind::NotFound => {
            Ok(())
        }
        other => other,
    }
}

/// Takes map `name` out of the loaded object, for the part that owns it.
fn take_map(ebpf: &mut aya::Ebpf, name: &'static str) -> Result<aya::maps::Map, KernelError> {
    ebpf.take_map(name).ok_or(KernelError::MissingMap(name))
}

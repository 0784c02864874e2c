//! The kernel side as seen from userspace: load and attach the eBPF
//! programs (`load.rs`), then drain their maps window by window
//! (`drain.rs`). Only this module touches aya types.
mod drain;
mod in_flight;
mod load;
mod task_storage;
mod unwind_maps;

pub use drain::{Flip, RawSample, RawWindow, Stack};
pub use in_flight::{InFlightStats, Rng};
pub use load::Kernel;

use aya::{EbpfError, maps::MapError, programs::ProgramError};

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("loading the eBPF object: {0}")]
    Load(#[from] EbpfError),
    #[error("eBPF program {name}: {source}")]
    Program {
        name: &'static str,
        source: ProgramError,
    },
    #[error("attaching {name} to CPU {cpu}: {source}")]
    Attach {
        name: &'static str,
        cpu: u32,
        source: ProgramError,
    },
    #[error("eBPF map {name}: {source}")]
    Map {
        name: &'static str,
        source: MapError,
    },
    #[error("eBPF map {name}: {source}")]
    MapIo {
        name: &'static str,
        source: std::io::Error,
    },
    #[error("eBPF map {name} is not of the type the daemon expects")]
    MapType { name: &'static str },
    #[error("opening a pidfd for a thread (needs Linux 6.9 or later): {0}")]
    Pidfd(std::io::Error),
    #[error("eBPF object has no {kind} named {name}")]
    Missing {
        kind: &'static str,
        name: &'static str,
    },
    #[error("mapping the unwind table array into memory: {0}")]
    MapRows(std::io::Error),
    #[error("reading the kernel's BTF: {0}")]
    Btf(aya::BtfError),
    #[error("listing online CPUs from {path}: {source}")]
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

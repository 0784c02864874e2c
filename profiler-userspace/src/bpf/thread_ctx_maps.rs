//! The thread context map as the daemon writes it: where each process
//! that publishes OpenTelemetry's thread context keeps it
//! (`THREAD_CTX_PROCS`).
use aya::{
    Ebpf,
    maps::{HashMap, Map, MapData},
};
use profiler_common::{maps::THREAD_CTX_PROCS, thread_ctx::ThreadCtxProcess};

use super::error::{KernelError, removed, take_map};

/// The kernel map `crate::runtimes::thread_ctx` writes:
/// [`Kernel`](super::Kernel) here, in memory in tests.
pub trait ThreadCtxMaps {
    /// Publishes (replaces) where process `pid` keeps its thread context.
    ///
    /// # Errors
    /// When the kernel map refuses the entry.
    fn set_thread_ctx(&mut self, pid: u32, process: ThreadCtxProcess) -> Result<(), KernelError>;
    /// Forgets `pid`'s thread context (a no-op when it had none).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    fn remove_thread_ctx(&mut self, pid: u32) -> Result<(), KernelError>;
}

/// The map, taken from the loaded object.
pub(super) struct ThreadCtxTables {
    procs: Map,
}

impl ThreadCtxTables {
    /// Takes the map out of `ebpf`.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, KernelError> {
        Ok(Self {
            procs: take_map(ebpf, THREAD_CTX_PROCS)?,
        })
    }

    /// The LRU map, which aya opens as a hash map.
    fn procs(&mut self) -> Result<HashMap<&mut MapData, u32, ThreadCtxProcess>, KernelError> {
        HashMap::try_from(&mut self.procs).map_err(KernelError::map(THREAD_CTX_PROCS))
    }
}

impl ThreadCtxMaps for ThreadCtxTables {
    fn set_thread_ctx(&mut self, pid: u32, process: ThreadCtxProcess) -> Result<(), KernelError> {
        self.procs()?
            .insert(pid, process, 0)
            .map_err(KernelError::map(THREAD_CTX_PROCS))
    }

    fn remove_thread_ctx(&mut self, pid: u32) -> Result<(), KernelError> {
        removed(self.procs()?.remove(&pid)).map_err(KernelError::map(THREAD_CTX_PROCS))
    }
}

//! The Java walk's map as the daemon writes it: the JVMs it publishes
//! (`JAVA_PROCS`).
use aya::{
    Ebpf,
    maps::{HashMap, Map, MapData},
};
use profiler_common::{java::JavaProcess, maps::JAVA_PROCS};

use super::error::{KernelError, removed, take_map};

/// The kernel map the Java runtime (`crate::runtimes::java`) writes:
/// [`Kernel`](super::Kernel) here, in memory in tests.
pub trait JavaMaps {
    /// Publishes (replaces) what the walk needs of JVM `pid`.
    ///
    /// # Errors
    /// When the kernel map refuses the entry.
    fn set_java(&mut self, pid: u32, process: &JavaProcess) -> Result<(), KernelError>;
    /// Forgets `pid` as a JVM (a no-op when it was none).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    fn remove_java(&mut self, pid: u32) -> Result<(), KernelError>;
}

/// The map, taken from the loaded object.
pub(super) struct JavaTables {
    procs: Map,
}

impl JavaTables {
    /// Takes the map out of `ebpf`.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, KernelError> {
        Ok(Self {
            procs: take_map(ebpf, JAVA_PROCS)?,
        })
    }

    /// The LRU map, which aya opens as a hash map.
    fn procs(&mut self) -> Result<HashMap<&mut MapData, u32, JavaProcess>, KernelError> {
        HashMap::try_from(&mut self.procs).map_err(KernelError::map(JAVA_PROCS))
    }
}

impl JavaMaps for JavaTables {
    fn set_java(&mut self, pid: u32, process: &JavaProcess) -> Result<(), KernelError> {
        self.procs()?
            .insert(pid, process, 0)
            .map_err(KernelError::map(JAVA_PROCS))
    }

    fn remove_java(&mut self, pid: u32) -> Result<(), KernelError> {
        removed(self.procs()?.remove(&pid)).map_err(KernelError::map(JAVA_PROCS))
    }
}

//! The Java walk's maps as the daemon uses them: the JVMs it publishes
//! (`JAVA_PROCS`) and the frames the walk asks it to name
//! (`JAVA_FRAME_REQUESTS`).
use aya::{
    Ebpf,
    maps::{HashMap, Map, MapData},
};
use profiler_common::{
    java::{FrameSeen, JavaProcess},
    maps::{JAVA_FRAME_REQUESTS, JAVA_PROCS},
};

use super::error::{KernelError, removed, take_map};

/// The kernel maps the Java runtime (`crate::runtimes::java`) writes and
/// reads: [`Kernel`](super::Kernel) here, in memory in tests.
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
    /// The Java frames the walk recorded for the first time since the last
    /// call.
    ///
    /// # Errors
    /// When the kernel map cannot be read.
    fn take_frame_requests(&mut self) -> Result<Vec<FrameSeen>, KernelError>;
}

/// The map, taken from the loaded object.
pub(super) struct JavaTables {
    procs: Map,
    requests: Map,
}

impl JavaTables {
    /// Takes the map out of `ebpf`.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, KernelError> {
        Ok(Self {
            procs: take_map(ebpf, JAVA_PROCS)?,
            requests: take_map(ebpf, JAVA_FRAME_REQUESTS)?,
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

    fn take_frame_requests(&mut self) -> Result<Vec<FrameSeen>, KernelError> {
        let mut requests: HashMap<&mut MapData, FrameSeen, u8> =
            HashMap::try_from(&mut self.requests).map_err(KernelError::map(JAVA_FRAME_REQUESTS))?;
        let seen: Vec<FrameSeen> = requests.keys().filter_map(Result::ok).collect();
        for key in &seen {
            let _ = requests.remove(key);
        }
        Ok(seen)
    }
}

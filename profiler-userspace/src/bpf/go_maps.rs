//! The Go maps as the daemon uses them: the processes whose samples
//! record their running goroutine's pprof labels (`GO_PROCS`), and the
//! label sets the samples ask it to read (`GO_LABEL_REQUESTS`).
use aya::{
    Ebpf,
    maps::{HashMap, Map, MapData},
};
use profiler_common::{
    go::{GoProcess, LabelSetSeen},
    maps::{GO_LABEL_REQUESTS, GO_PROCS},
};

use super::error::{KernelError, removed, take_map};

/// The kernel maps the Go runtime (`crate::runtimes::go`) writes and reads:
/// [`Kernel`](super::Kernel) here, in memory in tests.
pub trait GoMaps {
    /// Publishes (replaces) what the sample reads of Go process `pid`.
    ///
    /// # Errors
    /// When the kernel map refuses the entry.
    fn set_go(&mut self, pid: u32, process: &GoProcess) -> Result<(), KernelError>;
    /// Forgets `pid` as a Go process (a no-op when it was none).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    fn remove_go(&mut self, pid: u32) -> Result<(), KernelError>;
    /// The label sets the samples recorded for the first time since the
    /// last call.
    ///
    /// # Errors
    /// When the kernel map cannot be read.
    fn take_label_requests(&mut self) -> Result<Vec<LabelSetSeen>, KernelError>;
}

/// The maps, taken from the loaded object.
pub(super) struct GoTables {
    procs: Map,
    requests: Map,
}

impl GoTables {
    /// Takes the maps out of `ebpf`.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, KernelError> {
        Ok(Self {
            procs: take_map(ebpf, GO_PROCS)?,
            requests: take_map(ebpf, GO_LABEL_REQUESTS)?,
        })
    }

    /// The LRU map, which aya opens as a hash map.
    fn procs(&mut self) -> Result<HashMap<&mut MapData, u32, GoProcess>, KernelError> {
        HashMap::try_from(&mut self.procs).map_err(KernelError::map(GO_PROCS))
    }
}

impl GoMaps for GoTables {
    fn set_go(&mut self, pid: u32, process: &GoProcess) -> Result<(), KernelError> {
        self.procs()?
            .insert(pid, process, 0)
            .map_err(KernelError::map(GO_PROCS))
    }

    fn remove_go(&mut self, pid: u32) -> Result<(), KernelError> {
        removed(self.procs()?.remove(&pid)).map_err(KernelError::map(GO_PROCS))
    }

    fn take_label_requests(&mut self) -> Result<Vec<LabelSetSeen>, KernelError> {
        let mut requests: HashMap<&mut MapData, LabelSetSeen, u8> =
            HashMap::try_from(&mut self.requests).map_err(KernelError::map(GO_LABEL_REQUESTS))?;
        let seen: Vec<LabelSetSeen> = requests.keys().filter_map(Result::ok).collect();
        for key in &seen {
            let _ = requests.remove(key);
        }
        Ok(seen)
    }
}

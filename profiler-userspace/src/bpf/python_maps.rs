//! The Python walk's maps as the daemon writes them: the processes it
//! publishes (`PYTHON_PROCS`) and the code objects the walk asks it to
//! read (`PYTHON_CODE_REQUESTS`).
use aya::{
    Ebpf,
    maps::{HashMap, Map, MapData},
};
use profiler_common::{
    maps::{PYTHON_CODE_REQUESTS, PYTHON_PROCS},
    python::{CodeSeen, PythonProcess},
};

use super::error::{KernelError, removed, take_map};

/// The kernel maps the Python runtime (`crate::runtimes::python`) writes
/// and reads: [`Kernel`](super::Kernel) here, in memory in tests.
pub trait PythonMaps {
    /// Publishes (replaces) what the walk needs of Python process `pid`.
    ///
    /// # Errors
    /// When the kernel map refuses the entry.
    fn set_python(&mut self, pid: u32, process: &PythonProcess) -> Result<(), KernelError>;
    /// Forgets `pid` as a Python process (a no-op when it was none).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    fn remove_python(&mut self, pid: u32) -> Result<(), KernelError>;
    /// The code objects the walk recorded for the first time since the
    /// last call.
    ///
    /// # Errors
    /// When the kernel map cannot be read.
    fn take_code_requests(&mut self) -> Result<Vec<CodeSeen>, KernelError>;
}

/// The maps, taken from the loaded object.
pub(super) struct PythonTables {
    procs: Map,
    requests: Map,
}

impl PythonTables {
    /// Takes the maps out of `ebpf`.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, KernelError> {
        Ok(Self {
            procs: take_map(ebpf, PYTHON_PROCS)?,
            requests: take_map(ebpf, PYTHON_CODE_REQUESTS)?,
        })
    }

    /// The LRU map, which aya opens as a hash map.
    fn procs(&mut self) -> Result<HashMap<&mut MapData, u32, PythonProcess>, KernelError> {
        HashMap::try_from(&mut self.procs).map_err(KernelError::map(PYTHON_PROCS))
    }
}

impl PythonMaps for PythonTables {
    fn set_python(&mut self, pid: u32, process: &PythonProcess) -> Result<(), KernelError> {
        self.procs()?
            .insert(pid, process, 0)
            .map_err(KernelError::map(PYTHON_PROCS))
    }

    fn remove_python(&mut self, pid: u32) -> Result<(), KernelError> {
        removed(self.procs()?.remove(&pid)).map_err(KernelError::map(PYTHON_PROCS))
    }

    fn take_code_requests(&mut self) -> Result<Vec<CodeSeen>, KernelError> {
        let mut requests: HashMap<&mut MapData, CodeSeen, u8> =
            HashMap::try_from(&mut self.requests)
                .map_err(KernelError::map(PYTHON_CODE_REQUESTS))?;
        let seen: Vec<CodeSeen> = requests.keys().filter_map(Result::ok).collect();
        for key in &seen {
            let _ = requests.remove(key);
        }
        Ok(seen)
    }
}

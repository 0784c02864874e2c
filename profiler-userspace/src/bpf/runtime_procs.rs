//! Which runtimes' maps hold each process (`RUNTIME_PROCS`), kept by the
//! [`Kernel`](super::Kernel) beside the runtime maps themselves: a bit is
//! set after its map's entry is written and cleared before the entry is
//! removed, so a sample never skips an entry that is there.
use aya::{
    Ebpf,
    maps::{HashMap, Map, MapData, MapError},
};
use profiler_common::{maps::RUNTIME_PROCS, runtimes::Runtimes};

use super::error::{KernelError, removed, take_map};

/// The map, taken from the loaded object.
pub(super) struct RuntimeProcs {
    procs: Map,
}

impl RuntimeProcs {
    /// Takes the map out of `ebpf`.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, KernelError> {
        Ok(Self {
            procs: take_map(ebpf, RUNTIME_PROCS)?,
        })
    }

    fn procs(&mut self) -> Result<HashMap<&mut MapData, u32, Runtimes>, KernelError> {
        HashMap::try_from(&mut self.procs).map_err(KernelError::map(RUNTIME_PROCS))
    }

    /// The runtimes `pid` is in now (none without an entry). A read that
    /// fails otherwise is an error: taken for none, the write after it
    /// would drop the other runtimes' bits.
    fn of(procs: &HashMap<&mut MapData, u32, Runtimes>, pid: u32) -> Result<Runtimes, KernelError> {
        match procs.get(&pid, 0) {
            Ok(runtimes) => Ok(runtimes),
            Err(MapError::KeyNotFound) => Ok(Runtimes::NONE),
            Err(e) => Err(KernelError::map(RUNTIME_PROCS)(e)),
        }
    }

    /// Notes that `runtime`'s map holds `pid` now. The map holds as many
    /// processes as the runtime maps together; should the daemon ever know
    /// more, the process is named in a warning and its samples go without
    /// that runtime's frames and labels.
    pub(super) fn add(&mut self, pid: u32, runtime: Runtimes) -> Result<(), KernelError> {
        let mut procs = self.procs()?;
        let now = Self::of(&procs, pid)?;
        if now.has(runtime) {
            return Ok(());
        }
        match procs.insert(pid, now.with(runtime), 0) {
            Ok(()) => Ok(()),
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::E2BIG) => {
                tracing::warn!(
                    pid,
                    "{RUNTIME_PROCS} is full: this process's samples go without its runtime's frames and labels"
                );
                Ok(())
            }
            Err(e) => Err(KernelError::map(RUNTIME_PROCS)(e)),
        }
    }

    /// The runtimes `pid` is noted in.
    #[cfg(test)]
    pub(super) fn of_pid(&mut self, pid: u32) -> Result<Runtimes, KernelError> {
        Self::of(&self.procs()?, pid)
    }

    /// Notes that `runtime`'s map is about to drop `pid`.
    pub(super) fn remove(&mut self, pid: u32, runtime: Runtimes) -> Result<(), KernelError> {
        let mut procs = self.procs()?;
        let now = Self::of(&procs, pid)?;
        if !now.has(runtime) {
            return Ok(());
        }
        let left = now.without(runtime);
        if left.is_empty() {
            removed(procs.remove(&pid)).map_err(KernelError::map(RUNTIME_PROCS))
        } else {
            procs
                .insert(pid, left, 0)
                .map_err(KernelError::map(RUNTIME_PROCS))
        }
    }
}

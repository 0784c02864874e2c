//! The kernel's target set: which processes the programs record (with
//! `--pid`, `--comm` and `--pid-file` targets; `--all` has none).
use aya::{
    Ebpf,
    maps::{Array, HashMap, Map, MapData},
};
use profiler_common::{
    maps::{TARGET_COMMS, TARGET_FILTER, TARGETS, target_filter_slot},
    sample::{COMM_LEN, comm_key},
};

use super::error::{KernelError, removed, take_map};

/// The kernel's target set as the daemon changes it: [`Kernel`](super::Kernel)
/// here, an in-memory one in tests (`in_memory.rs`).
pub trait TargetMaps {
    /// The pids in the set: the `--pid` targets and the matches found by
    /// the daemon, and `--comm` matches the kernel added itself at their
    /// exec.
    ///
    /// # Errors
    /// When the target map cannot be read.
    fn target_pids(&mut self) -> Result<Vec<u32>, KernelError>;
    /// Starts profiling process `pid`.
    ///
    /// # Errors
    /// When the target map refuses the entry (it is full).
    fn add_target(&mut self, pid: u32) -> Result<(), KernelError>;
    /// Stops profiling process `pid` (it exited; its pid may be reused).
    ///
    /// # Errors
    /// When the target map cannot be written.
    fn remove_target(&mut self, pid: u32) -> Result<(), KernelError>;
}

impl TargetMaps for TargetSet {
    fn target_pids(&mut self) -> Result<Vec<u32>, KernelError> {
        Ok(self.targets()?.keys().filter_map(Result::ok).collect())
    }

    fn add_target(&mut self, pid: u32) -> Result<(), KernelError> {
        // The filter first: a thread is only looked up in the set when its
        // slot is set.
        self.set_filter_slot(pid, 1)?;
        self.targets()?
            .insert(pid, 1, 0)
            .map_err(KernelError::map(TARGETS))
    }

    fn remove_target(&mut self, pid: u32) -> Result<(), KernelError> {
        let mut targets = self.targets()?;
        removed(targets.remove(&pid)).map_err(KernelError::map(TARGETS))?;
        // The slot stays set while another target shares it. A --comm
        // match the kernel adds meanwhile may see its slot cleared: the
        // next refresh adopts it and sets the slot again.
        let slot = target_filter_slot(pid);
        let shared = targets
            .keys()
            .filter_map(Result::ok)
            .any(|other| target_filter_slot(other) == slot);
        if shared {
            Ok(())
        } else {
            self.set_filter_slot(pid, 0)
        }
    }
}

/// The target set's maps, taken from the loaded object: the pids, the
/// filter the programs check first, and the `--comm` names.
pub(super) struct TargetSet {
    targets: Map,
    filter: Map,
    /// Kept open: the programs are loaded after the maps are taken, by
    /// their fds.
    _comms: Map,
}

impl TargetSet {
    /// Takes the target maps out of `ebpf`, with the `--pid` targets
    /// `pids` and the `--comm` names `comms` in them: a process that execs
    /// into one of those becomes a target in the kernel at once.
    pub(super) fn take(
        ebpf: &mut Ebpf,
        pids: &[u32],
        comms: &[String],
    ) -> Result<Self, KernelError> {
        let mut names = take_map(ebpf, TARGET_COMMS)?;
        let mut by_name: HashMap<&mut MapData, [u8; COMM_LEN], u8> =
            HashMap::try_from(&mut names).map_err(KernelError::map(TARGET_COMMS))?;
        for comm in comms {
            by_name
                .insert(comm_key(comm), 1, 0)
                .map_err(KernelError::map(TARGET_COMMS))?;
        }
        let mut set = Self {
            targets: take_map(ebpf, TARGETS)?,
            filter: take_map(ebpf, TARGET_FILTER)?,
            _comms: names,
        };
        for &pid in pids {
            set.add_target(pid)?;
        }
        Ok(set)
    }

    /// Sets (1) or clears (0) the filter slot of `pid`, which the
    /// programs check before they look the process up in the set.
    fn set_filter_slot(&mut self, pid: u32, value: u8) -> Result<(), KernelError> {
        let mut filter: Array<&mut MapData, u8> =
            Array::try_from(&mut self.filter).map_err(KernelError::map(TARGET_FILTER))?;
        filter
            .set(target_filter_slot(pid), value, 0)
            .map_err(KernelError::map(TARGET_FILTER))
    }

    fn targets(&mut self) -> Result<HashMap<&mut MapData, u32, u8>, KernelError> {
        HashMap::try_from(&mut self.targets).map_err(KernelError::map(TARGETS))
    }
}

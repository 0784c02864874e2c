//! The kernel's target set: which processes the programs record (with
//! `--pid`, `--comm` and `--pid-file` targets; `--all` has none).
use aya::maps::{Array, HashMap, MapData};
use profiler_common::maps::{TARGET_FILTER, TARGETS, target_filter_slot};

use super::{Kernel, KernelError};

/// The kernel's target set as the daemon changes it: [`Kernel`] here, an
/// in-memory one in tests (`memory.rs`).
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

impl TargetMaps for Kernel {
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
        super::removed(targets.remove(&pid)).map_err(KernelError::map(TARGETS))?;
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

impl Kernel {
    /// Sets (1) or clears (0) the filter slot of `pid`, which the
    /// programs check before they look the process up in the set.
    fn set_filter_slot(&mut self, pid: u32, value: u8) -> Result<(), KernelError> {
        let map = self
            .ebpf
            .map_mut(TARGET_FILTER)
            .ok_or(KernelError::MissingMap(TARGET_FILTER))?;
        let mut filter: Array<&mut MapData, u8> =
            Array::try_from(map).map_err(KernelError::map(TARGET_FILTER))?;
        filter
            .set(target_filter_slot(pid), value, 0)
            .map_err(KernelError::map(TARGET_FILTER))
    }

    fn targets(&mut self) -> Result<HashMap<&mut MapData, u32, u8>, KernelError> {
        let map = self
            .ebpf
            .map_mut(TARGETS)
            .ok_or(KernelError::MissingMap(TARGETS))?;
        HashMap::try_from(map).map_err(KernelError::map(TARGETS))
    }
}

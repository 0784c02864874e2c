//! The Go maps as the daemon uses them: the processes whose samples
//! record their running goroutine's pprof labels (`GO_PROCS`), the
//! label sets the samples ask it to read (`GO_LABEL_REQUESTS`), and with
//! `--goroutine-wakers` the probe on each Go binary's `runtime.ready` and
//! the goroutines' last wakeups it records (`GO_WAKES`).
use std::{path::Path, sync::Arc};

use aya::{
    Ebpf,
    maps::{Array, HashMap, Map, MapData},
};
use profiler_common::{
    go::{GoProcess, LabelSetSeen},
    go_wake::{GoWake, GoWakeKey},
    maps::{GO_BINARIES, GO_BINARIES_MAX_ENTRIES, GO_LABEL_REQUESTS, GO_PROCS, GO_WAKES},
};

use super::error::{KernelError, removed, take_map};

/// Where the goroutines' last wakeups are, for the goroutine reader's
/// thread (`runtimes/go/wakers.rs`).
pub trait GoWakeLookup: Send + Sync {
    /// The last wakeup of goroutine `goid` of process `pid`, if recorded.
    fn last_wake(&self, pid: u32, goid: u64) -> Option<GoWake>;
}

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
    /// Probes `runtime.ready` at file offset `offset` of the binary at
    /// `exe`, whose goroutines are laid out as `binary` says, for every
    /// target that runs it (`--goroutine-wakers`).
    ///
    /// # Errors
    /// When the probe cannot be loaded or attached, or as many binaries
    /// as `GO_BINARIES` holds are probed already.
    fn probe_ready(
        &mut self,
        _exe: &Path,
        _offset: u64,
        _binary: &GoProcess,
    ) -> Result<(), KernelError> {
        Ok(())
    }
    /// The goroutines' last wakeups (only the first call has them).
    fn go_wakes(&mut self) -> Option<Arc<dyn GoWakeLookup>> {
        None
    }
}

/// `GO_WAKES`, read from the goroutine reader's thread.
struct GoWakes(Map);

impl GoWakeLookup for GoWakes {
    fn last_wake(&self, pid: u32, goid: u64) -> Option<GoWake> {
        let map: HashMap<&MapData, GoWakeKey, GoWake> = HashMap::try_from(&self.0).ok()?;
        let key = GoWakeKey {
            pid,
            reserved: 0,
            goid,
        };
        map.get(&key, 0).ok()
    }
}

/// The maps, taken from the loaded object.
pub(super) struct GoTables {
    procs: Map,
    requests: Map,
    /// `GO_WAKES`, until [`GoMaps::go_wakes`] takes it.
    wakes: Option<Map>,
    binaries: Map,
    /// Binaries in `binaries` so far.
    probed: u32,
}

impl GoTables {
    /// Takes the maps out of `ebpf`.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, KernelError> {
        Ok(Self {
            procs: take_map(ebpf, GO_PROCS)?,
            requests: take_map(ebpf, GO_LABEL_REQUESTS)?,
            wakes: Some(take_map(ebpf, GO_WAKES)?),
            binaries: take_map(ebpf, GO_BINARIES)?,
            probed: 0,
        })
    }

    /// Stores `binary` under the next free index of `GO_BINARIES`, which
    /// its probe's cookie names; the index is taken by
    /// [`Self::binary_probed`], once the probe is attached.
    pub(super) fn stage_binary(&mut self, binary: &GoProcess) -> Result<u32, KernelError> {
        if self.probed >= GO_BINARIES_MAX_ENTRIES {
            return Err(KernelError::MapFull(GO_BINARIES));
        }
        let mut binaries: Array<&mut MapData, GoProcess> =
            Array::try_from(&mut self.binaries).map_err(KernelError::map(GO_BINARIES))?;
        binaries
            .set(self.probed, binary, 0)
            .map_err(KernelError::map(GO_BINARIES))?;
        Ok(self.probed)
    }

    /// The binary staged last is probed: its index is taken.
    pub(super) fn binary_probed(&mut self) {
        self.probed += 1;
    }

    /// The goroutines' last wakeups (only the first call has them).
    pub(super) fn take_wakes(&mut self) -> Option<Arc<dyn GoWakeLookup>> {
        let wakes: Arc<dyn GoWakeLookup> = Arc::new(GoWakes(self.wakes.take()?));
        Some(wakes)
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

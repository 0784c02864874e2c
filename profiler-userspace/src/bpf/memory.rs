//! The kernel's maps in memory, for the tests of everything above `bpf/`
//! that run without root: rows recorded into the active slot as the
//! programs would record them, drained slot by slot with the counters
//! since the last drain, the target set, and the intervals still open.
use std::collections::{BTreeSet, HashSet};

use profiler_common::stats::{STATS_LEN, Stat};

use super::{Drained, Flip, InFlightMaps, InFlightStats, KernelError, Rng, TargetMaps, WindowMaps};
use crate::{
    config::{OffCpu, Target},
    window::{MapEntries, RawSample, Stack},
};

/// The two slots of the window's maps, the counters, the target set and
/// the open intervals; time is the caller's (`advance`).
#[derive(Default)]
pub struct MemoryKernel {
    slots: [Vec<RawSample>; 2],
    active: usize,
    now_ns: u64,
    last_flip_ns: u64,
    /// Counters since the last drain, by [`Stat`].
    stats: [u64; STATS_LEN as usize],
    /// Threads still off the CPU: the part each would add at a window's
    /// end, whatever the rule.
    pub open: Vec<RawSample>,
    pub targets: BTreeSet<u32>,
    /// Flips so far.
    pub flips: u32,
}

impl MemoryKernel {
    /// Records `row` in the active slot, as a program would.
    pub fn record(&mut self, row: RawSample) {
        self.stats[Stat::OnCpuSamples as usize] += row.samples;
        self.slots[self.active].push(row);
    }

    /// Counts `n` more of `stat`, as a program would.
    pub fn count(&mut self, stat: Stat, n: u64) {
        self.stats[stat as usize] += n;
    }

    /// Lets `ns` of the kernel's clock pass.
    pub fn advance(&mut self, ns: u64) {
        self.now_ns += ns;
    }
}

/// The distinct stacks of `rows`, as the stack map would hold them.
fn stacks(rows: &[RawSample]) -> usize {
    rows.iter()
        .flat_map(|r| [&r.user_stack, &r.kernel_stack])
        .filter(|s| matches!(s, Stack::Frames(_) | Stack::Truncated(_)))
        .collect::<HashSet<_>>()
        .len()
}

impl WindowMaps for MemoryKernel {
    fn flip(&mut self) -> Result<Flip, KernelError> {
        let flip = Flip {
            slot: u32::try_from(self.active).unwrap_or(0),
            start_ns: self.last_flip_ns,
            end_ns: self.now_ns,
        };
        self.active = 1 - self.active;
        self.last_flip_ns = self.now_ns;
        self.flips += 1;
        Ok(flip)
    }

    fn drain(&mut self, flip: &Flip) -> Result<Drained, KernelError> {
        let samples = std::mem::take(&mut self.slots[flip.slot as usize]);
        let map_entries = MapEntries {
            samples: u32::try_from(samples.len()).unwrap_or(u32::MAX),
            stacks: u32::try_from(stacks(&samples)).unwrap_or(u32::MAX),
        };
        Ok(Drained {
            samples,
            stats: std::mem::replace(&mut self.stats, [0; STATS_LEN as usize]),
            unknown_entries: 0,
            map_entries,
        })
    }

    fn active_entries(&self) -> Result<MapEntries, KernelError> {
        let rows = &self.slots[self.active];
        Ok(MapEntries {
            samples: u32::try_from(rows.len()).unwrap_or(u32::MAX),
            stacks: u32::try_from(stacks(rows)).unwrap_or(u32::MAX),
        })
    }
}

impl InFlightMaps for MemoryKernel {
    fn account_in_flight(
        &mut self,
        _flip: &Flip,
        _rule: OffCpu,
        _target: &Target,
        _rng: &mut Rng,
    ) -> Result<(Vec<RawSample>, InFlightStats), KernelError> {
        let stats = InFlightStats {
            tracked: self.open.len() as u64,
            untracked: 0,
        };
        Ok((self.open.clone(), stats))
    }
}

impl TargetMaps for MemoryKernel {
    fn target_pids(&mut self) -> Result<Vec<u32>, KernelError> {
        Ok(self.targets.iter().copied().collect())
    }

    fn add_target(&mut self, pid: u32) -> Result<(), KernelError> {
        self.targets.insert(pid);
        Ok(())
    }

    fn remove_target(&mut self, pid: u32) -> Result<(), KernelError> {
        self.targets.remove(&pid);
        Ok(())
    }
}

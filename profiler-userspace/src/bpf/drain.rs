//! End of a window: flip the kernel to the other slot, then read and clear
//! the slot it was writing to. What leaves here is plain owned data.
use std::{collections::HashMap as StdHashMap, sync::Arc};

use aya::{
    Ebpf,
    maps::{Array, Map, MapData, PerCpuArray},
};
use profiler_common::{
    maps::{
        CONTROL, CONTROL_ACTIVE_SLOT, CONTROL_LAST_FLIP_NS, SLOTS, STATS, SWITCH_CPU, THREAD_ATTRS,
        slot_maps,
    },
    sample::{SampleKey, SampleValue, ThreadState, comm_str},
    sched::SwitchCpu,
    stack::{NO_STACK, StackTrace},
    stats::{Stat, StatCounts},
    waker::{self, WakerRecord},
};

use super::{
    batch,
    error::{KernelError, take_map},
    thread_attrs::AttrsRead,
};
use crate::sample::{
    LabelSetAt, MapEntries, RawSample, RowLabels, Stack, Waker, WokenBy, goroutine_label,
    python_gil_labels, trace_labels,
};

/// A window's end as the kernel saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flip {
    /// The slot the window wrote to.
    pub slot: u32,
    /// Monotonic start and end of the window (ns, the kernel's clock).
    pub start_ns: u64,
    pub end_ns: u64,
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock of `bpf_ktime_get_ns`.
#[must_use]
pub fn monotonic_ns() -> u64 {
    crate::clock::now_ns(libc::CLOCK_MONOTONIC)
}

/// What one drain read from the kernel's maps.
#[derive(Clone, Debug, Default)]
pub struct Drained {
    pub samples: Vec<RawSample>,
    /// Per-window increase of each kernel counter, indexed by [`Stat`].
    pub stats: StatCounts,
    /// Entries whose state field this build does not know (skipped).
    pub unknown_entries: u64,
    /// Entries the drained maps held.
    pub map_entries: MapEntries,
}

/// The window's maps as the pipeline reads them: [`Kernel`](super::Kernel) here, an
/// in-memory one in tests (`in_memory.rs`).
pub trait WindowMaps {
    /// Ends the window: points the kernel at the other slot and returns
    /// the one to drain, with the window's bounds.
    ///
    /// A program that read the slot number just before the flip may still
    /// be writing to the old slot for a few microseconds: callers wait a
    /// short grace period before [`WindowMaps::drain`].
    ///
    /// # Errors
    /// When the control map cannot be written.
    fn flip(&mut self) -> Result<Flip, KernelError>;
    /// Reads and clears the slot of `flip`, and the counters since the
    /// previous drain.
    ///
    /// # Errors
    /// When a map cannot be read or cleared.
    fn drain(&mut self, flip: &Flip) -> Result<Drained, KernelError>;
    /// Entries the active slot's maps hold now.
    ///
    /// # Errors
    /// When the counters cannot be read.
    fn active_entries(&self) -> Result<MapEntries, KernelError>;
}

/// The window's maps, taken from the loaded object: the control map, each
/// slot's samples and stacks, and the counters; with what the last drain
/// left (the slot written now, the counters then, its time).
pub(super) struct Windows {
    control: Map,
    /// Samples, stacks and wakers, by slot.
    slots: [(Map, Map, Map); SLOTS as usize],
    stats: Map,
    switch_cpu: Map,
    thread_attrs: Map,
    /// Whether the wakers maps are written (`--wakers`); else never read.
    wakers: bool,
    active_slot: u32,
    /// Kernel counters as of the previous drain, to report deltas.
    last_stats: StatCounts,
    /// Monotonic time of the last flip (of loading, before the first).
    last_flip_ns: u64,
}

impl Windows {
    /// Takes the window's maps out of `ebpf`, and points the kernel at
    /// slot 0. `wakers`: whether the kernel notes wakers.
    pub(super) fn take(ebpf: &mut Ebpf, wakers: bool) -> Result<Self, KernelError> {
        let mut slot = |slot| -> Result<(Map, Map, Map), KernelError> {
            let names = slot_maps(slot);
            Ok((
                take_map(ebpf, names.samples)?,
                take_map(ebpf, names.stacks)?,
                take_map(ebpf, names.wakers)?,
            ))
        };
        let slots = [slot(0)?, slot(1)?];
        let mut windows = Self {
            control: take_map(ebpf, CONTROL)?,
            slots,
            stats: take_map(ebpf, STATS)?,
            switch_cpu: take_map(ebpf, SWITCH_CPU)?,
            thread_attrs: take_map(ebpf, THREAD_ATTRS)?,
            wakers,
            active_slot: 0,
            last_stats: StatCounts::default(),
            last_flip_ns: 0,
        };
        windows.set_active_slot(0, 0)?;
        Ok(windows)
    }

    /// The first window starts now (once everything is attached).
    pub(super) fn start(&mut self) {
        self.last_flip_ns = monotonic_ns();
    }

    /// Tells the kernel which slot to write to, and when it was flipped.
    fn set_active_slot(&mut self, slot: u32, at_ns: u64) -> Result<(), KernelError> {
        let mut control: Array<&mut MapData, u64> =
            Array::try_from(&mut self.control).map_err(KernelError::map(CONTROL))?;
        control
            .set(CONTROL_ACTIVE_SLOT, u64::from(slot), 0)
            .map_err(KernelError::map(CONTROL))?;
        control
            .set(CONTROL_LAST_FLIP_NS, at_ns, 0)
            .map_err(KernelError::map(CONTROL))?;
        self.active_slot = slot;
        Ok(())
    }

    fn stats_delta(&mut self) -> Result<StatCounts, KernelError> {
        let off_cpu_seen = self.off_cpu_seen()?;
        let stats: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(&self.stats).map_err(KernelError::map(STATS))?;
        let mut delta = StatCounts::default();
        for stat in Stat::ALL {
            let index = stat as usize;
            let mut total: u64 = stats
                .get(&(stat as u32), 0)
                .map_err(KernelError::map(STATS))?
                .iter()
                .sum();
            if stat == Stat::OffCpuEventsSeen {
                total += off_cpu_seen;
            }
            delta[index] = total.saturating_sub(self.last_stats[index]);
            self.last_stats[index] = total;
        }
        Ok(delta)
    }

    /// Off-CPU intervals seen, which `sched_switch` counts in its per-CPU
    /// [`SwitchCpu`] rather than in `STATS`.
    fn off_cpu_seen(&self) -> Result<u64, KernelError> {
        let cpus: PerCpuArray<&MapData, SwitchCpu> =
            PerCpuArray::try_from(&self.switch_cpu).map_err(KernelError::map(SWITCH_CPU))?;
        Ok(cpus
            .get(&0, 0)
            .map_err(KernelError::map(SWITCH_CPU))?
            .iter()
            .map(|cpu| cpu.off_cpu_seen)
            .sum())
    }
}

impl WindowMaps for Windows {
    fn flip(&mut self) -> Result<Flip, KernelError> {
        let slot = self.active_slot;
        let end_ns = monotonic_ns();
        self.set_active_slot((slot + 1) % SLOTS, end_ns)?;
        let flip = Flip {
            slot,
            start_ns: self.last_flip_ns,
            end_ns,
        };
        self.last_flip_ns = end_ns;
        Ok(flip)
    }

    fn drain(&mut self, flip: &Flip) -> Result<Drained, KernelError> {
        let names = slot_maps(flip.slot);
        let (samples, stacks, wakers) = &self.slots[flip.slot as usize];
        let raw: Vec<(SampleKey, SampleValue)> = batch::take_all_of(samples, names.samples)?;
        let stacks: StdHashMap<u64, Stack> =
            batch::take_all_of_with(stacks, names.stacks, |hash, trace: &StackTrace| {
                (hash, stack_of(trace))
            })?
            .into_iter()
            .collect();
        let wakers: StdHashMap<u64, WakerRecord> = if self.wakers {
            batch::take_all_of(wakers, names.wakers)?
                .into_iter()
                .collect()
        } else {
            StdHashMap::new()
        };
        let mut woken_by: StdHashMap<u64, WokenBy> = StdHashMap::new();
        let mut attrs = AttrsRead::new(&self.thread_attrs)?;
        let mut window = Drained::default();
        window.map_entries.samples = u32::try_from(raw.len()).unwrap_or(u32::MAX);
        window.map_entries.stacks = u32::try_from(stacks.len()).unwrap_or(u32::MAX);
        for (key, value) in raw {
            let Some(state) = ThreadState::from_raw(key.state) else {
                window.unknown_entries += 1;
                continue;
            };
            let user_stack = resolve_stack(&stacks, key.user_stack, key.user_stack_err);
            let kernel_stack = resolve_stack(&stacks, key.kernel_stack, key.kernel_stack_err);
            window.samples.push(RawSample {
                pid: key.pid,
                tid: key.tid,
                thread: String::from_utf8_lossy(comm_str(&value.comm)).into_owned(),
                state,
                user_stack,
                kernel_stack,
                samples: value.samples,
                off_cpu_ns: value.off_cpu_ns,
                off_cpu_count: value.off_cpu_count,
                labels: row_labels(&key),
                runtime_ns: 0,
                label_set: LabelSetAt::of(key.go_labels, key.go_labels_identity),
                thread_attrs: attrs.get(key.thread_attrs),
                woken_by: resolve_waker(&wakers, &stacks, &mut woken_by, key.waker),
            });
        }
        let lost = attrs.lost;
        window.stats = self.stats_delta()?;
        window.stats[Stat::ThreadAttrsLost as usize] = lost;
        Ok(window)
    }

    /// From the kernel's insert counters since the last drain: two
    /// per-CPU reads, not a map walk.
    fn active_entries(&self) -> Result<MapEntries, KernelError> {
        let stats: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(&self.stats).map_err(KernelError::map(STATS))?;
        let since_drain = |stat: Stat| -> Result<u32, KernelError> {
            let total: u64 = stats
                .get(&(stat as u32), 0)
                .map_err(KernelError::map(STATS))?
                .iter()
                .sum();
            let new = total.saturating_sub(self.last_stats[stat as usize]);
            Ok(u32::try_from(new).unwrap_or(u32::MAX))
        };
        Ok(MapEntries {
            samples: since_drain(Stat::SampleEntries)?,
            stacks: since_drain(Stat::StackEntries)?,
        })
    }
}

/// A stack as the window's stack map held it: its frames, shared by every
/// sample whose key names it.
fn stack_of(trace: &StackTrace) -> Stack {
    if trace.truncated() {
        Stack::Truncated(trace.frames().into())
    } else {
        Stack::Frames(trace.frames().into())
    }
}

/// The stack a key names by `hash` (its capture's error `err`).
fn resolve_stack(stacks: &StdHashMap<u64, Stack>, hash: u64, err: i32) -> Stack {
    if hash == NO_STACK {
        return if err == 0 {
            Stack::Absent
        } else {
            Stack::Lost { errno: -err }
        };
    }
    // The key names a stack the map does not hold: report the loss.
    stacks.get(&hash).cloned().unwrap_or(Stack::Lost {
        errno: libc::ENOENT,
    })
}

/// Who woke the thread of a key whose `waker` field is `hash`: looked up
/// once per window.
fn resolve_waker(
    wakers: &StdHashMap<u64, WakerRecord>,
    stacks: &StdHashMap<u64, Stack>,
    woken_by: &mut StdHashMap<u64, WokenBy>,
    hash: u64,
) -> Option<WokenBy> {
    match hash {
        waker::NONE => return None,
        waker::UNKNOWN => return Some(WokenBy::Unknown),
        _ => {}
    }
    if let Some(known) = woken_by.get(&hash) {
        return Some(known.clone());
    }
    // A hash the map does not hold: the record was lost.
    let found = wakers.get(&hash).map_or(WokenBy::Unknown, |record| {
        WokenBy::Waker(Arc::new(Waker {
            pid: record.pid,
            tid: record.tid,
            thread: String::from_utf8_lossy(comm_str(&record.comm)).into_owned(),
            user_stack: resolve_stack(stacks, record.user_stack, record.user_stack_err),
            kernel_stack: resolve_stack(stacks, record.kernel_stack, record.kernel_stack_err),
        }))
    });
    woken_by.insert(hash, found.clone());
    Some(found)
}

/// The labels the kernel recorded in `key`: a Python thread's GIL, the
/// trace and span its thread ran in, the goroutine a Go thread ran.
fn row_labels(key: &SampleKey) -> Option<Arc<RowLabels>> {
    let gil = python_gil_labels(key.python_gil);
    let mut more = trace_labels(key.trace_id, key.span_id);
    if key.goroutine != 0 {
        more.push(goroutine_label(key.goroutine));
    }
    if more.is_empty() {
        return gil;
    }
    let mut labels = gil.map(|g| g.labels.clone()).unwrap_or_default();
    labels.extend(more);
    Some(Arc::new(RowLabels {
        replaces_thread: false,
        labels,
    }))
}

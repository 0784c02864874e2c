//! Adding weight to a (thread, stacks, state) key of the active slot.
use aya_ebpf::{bindings::BPF_NOEXIST, maps::HashMap};
use core::intrinsics::{AtomicOrdering, atomic_xadd};
use profiler_common::{
    sample::{COMM_LEN, SampleKey, SampleValue},
    stats::Stat,
};

use crate::maps;

/// Adds `weight` (its `comm` is used only when the key is new).
#[inline(always)]
pub fn add(samples: &HashMap<SampleKey, SampleValue>, key: &SampleKey, weight: &SampleValue) {
    if let Some(value) = samples.get_ptr_mut(key) {
        bump(value, weight);
        return;
    }
    match samples.insert(key, weight, u64::from(BPF_NOEXIST)) {
        Ok(()) => maps::count(Stat::SampleEntries, 1),
        // Another CPU inserted the same key between our lookup and insert.
        Err(err) if err == -maps::EEXIST => match samples.get_ptr_mut(key) {
            Some(value) => bump(value, weight),
            None => lost(weight, err),
        },
        Err(err) => lost(weight, err),
    }
}

/// Counts weight that could not be stored (the insert's `err`), so the
/// daemon can show it under a `[lost …]` frame instead of under-reporting
/// silently.
#[inline(always)]
fn lost(weight: &SampleValue, err: i32) {
    maps::count(Stat::of_refusal(err, Stat::MapFull), 1);
    maps::count(Stat::LostSamples, weight.samples);
    maps::count(Stat::LostOffCpuNs, weight.off_cpu_ns);
    maps::count(Stat::LostOffCpuCount, weight.off_cpu_count);
}

/// A weight with no name yet.
#[inline(always)]
pub const fn weight(samples: u64, off_cpu_ns: u64, off_cpu_count: u64) -> SampleValue {
    SampleValue {
        samples,
        off_cpu_ns,
        off_cpu_count,
        comm: [0; COMM_LEN],
    }
}

#[inline(always)]
fn bump(value: *mut SampleValue, weight: &SampleValue) {
    // SAFETY: `value` comes from a successful hash map lookup, so it points
    // at a live, 8-byte aligned SampleValue for the duration of this
    // program. Other CPUs may update it concurrently, hence atomic adds
    // (BPF_ATOMIC | BPF_ADD; core's AtomicU64 has no fetch_add on BPF).
    unsafe {
        if weight.samples != 0 {
            atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(
                &raw mut (*value).samples,
                weight.samples,
            );
        }
        if weight.off_cpu_ns != 0 {
            atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(
                &raw mut (*value).off_cpu_ns,
                weight.off_cpu_ns,
            );
        }
        if weight.off_cpu_count != 0 {
            atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(
                &raw mut (*value).off_cpu_count,
                weight.off_cpu_count,
            );
        }
    }
}

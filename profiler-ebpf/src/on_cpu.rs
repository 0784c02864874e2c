//! On-CPU sampling: one cpu-clock tick adds one sample to its thread's
//! (stacks, state = running) key.
use aya_ebpf::{
    bindings::{BPF_F_USER_STACK, BPF_NOEXIST},
    helpers::bpf_get_current_comm,
    programs::PerfEventContext,
};
use core::intrinsics::{AtomicOrdering, atomic_xadd};
use profiler_common::{
    sample::{COMM_LEN, SampleKey, SampleValue, ThreadState},
    stats::Stat,
};

use crate::{maps, stack, target};

const EEXIST: i32 = 17;

pub fn record(ctx: &PerfEventContext) {
    let Some((pid, tid)) = target::current() else {
        return;
    };
    maps::count(Stat::OnCpuSamples, 1);
    let slot = maps::active_slot();
    let (user_stack, user_stack_err) = stack::capture(
        ctx,
        &slot,
        u64::from(BPF_F_USER_STACK),
        Stat::UserStackErrors,
    );
    let (kernel_stack, kernel_stack_err) = stack::capture(ctx, &slot, 0, Stat::KernelStackErrors);
    let key = SampleKey {
        pid,
        tid,
        user_stack,
        kernel_stack,
        user_stack_err,
        kernel_stack_err,
        state: ThreadState::Running as u32,
        pad: 0,
    };
    add_sample(slot.samples, &key);
}

#[inline(always)]
fn add_sample(samples: &aya_ebpf::maps::HashMap<SampleKey, SampleValue>, key: &SampleKey) {
    if let Some(value) = samples.get_ptr_mut(key) {
        bump(value);
        return;
    }
    let comm = bpf_get_current_comm().unwrap_or([0u8; COMM_LEN]);
    let value = SampleValue { samples: 1, comm };
    match samples.insert(key, value, u64::from(BPF_NOEXIST)) {
        Ok(()) => {}
        // Another CPU inserted the same key between our lookup and insert.
        Err(err) if err == -EEXIST => {
            if let Some(value) = samples.get_ptr_mut(key) {
                bump(value);
            }
        }
        Err(_) => maps::count(Stat::MapFull, 1),
    }
}

#[inline(always)]
fn bump(value: *mut SampleValue) {
    // SAFETY: `value` comes from a successful hash map lookup, so it points
    // at a live, 8-byte aligned SampleValue for the duration of this
    // program. Other CPUs may update it concurrently, hence the atomic add
    // (BPF_ATOMIC | BPF_ADD; core's AtomicU64 has no fetch_add on BPF).
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(&raw mut (*value).samples, 1) };
}

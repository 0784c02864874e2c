//! On-CPU sampling: one cpu-clock tick adds one sample to its thread's
//! (stacks, state = running) key.
use aya_ebpf::{
    bindings::{BPF_F_USER_STACK, BPF_NOEXIST},
    helpers::bpf_get_current_comm,
    programs::{PerfEventContext, tracing::StackIdContext as _},
};
use core::intrinsics::{AtomicOrdering, atomic_xadd};
use profiler_common::{
    sample::{COMM_LEN, SampleKey, SampleValue, ThreadState},
    stats::Stat,
};

use crate::{maps, target};

const EFAULT: i32 = 14;
const EEXIST: i32 = 17;

pub fn record(ctx: &PerfEventContext) {
    let Some((pid, tid)) = target::current() else {
        return;
    };
    maps::count(Stat::OnCpuSamples, 1);
    let slot = maps::active_slot();

    let user_stack_id = stack_id(
        ctx.get_stackid(slot.stacks, u64::from(BPF_F_USER_STACK)),
        Stat::UserStackErrors,
    );
    let kernel_stack_id = stack_id(ctx.get_stackid(slot.stacks, 0), Stat::KernelStackErrors);

    let key = SampleKey {
        pid,
        tid,
        user_stack_id,
        kernel_stack_id,
        state: ThreadState::Running as u32,
        pad: 0,
    };
    add_sample(slot.samples, &key);
}

/// The stack id for the key: the id, or the negative errno of a failed
/// `bpf_get_stackid`, which is counted. EFAULT means there is no such
/// context (a kernel thread has no user stack; a sample taken in user mode
/// has no kernel stack), which is not a loss.
#[inline(always)]
fn stack_id(result: Result<i64, i32>, stat: Stat) -> i32 {
    match result {
        // Ids index a map of at most STACKS_MAX_ENTRIES entries.
        #[expect(clippy::cast_possible_truncation, reason = "ids are below max_entries")]
        Ok(id) => id as i32,
        Err(err) => {
            if err == -EEXIST {
                maps::count(Stat::StackCollisions, 1);
            } else if err != -EFAULT {
                maps::count(stat, 1);
            }
            err
        }
    }
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

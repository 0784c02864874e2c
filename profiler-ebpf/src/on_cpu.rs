//! On-CPU sampling: one cpu-clock tick adds one sample to its thread's
//! (stacks, state = running) key.
use aya_ebpf::{helpers::bpf_get_current_comm, programs::PerfEventContext};
use profiler_common::{
    sample::{COMM_LEN, ThreadState},
    stats::Stat,
};

use crate::{aggregate, go, maps, maps::Scratch, stack, target, thread_ctx, unwind};

pub fn record(ctx: &PerfEventContext) {
    let Some((pid, tid)) = target::current() else {
        return;
    };
    maps::count(Stat::OnCpuSamples, 1);
    let slot = maps::active_slot();
    let (user_stack, user_stack_err, python_gil) =
        unwind::capture_user(&slot, pid, Scratch::Sampling);
    let (kernel_stack, kernel_stack_err) =
        stack::capture_current(ctx, &slot, 0, Stat::KernelStackErrors, Scratch::Sampling);
    let Some(key) = maps::key_scratch(Scratch::Sampling) else {
        return;
    };
    (key.pid, key.tid) = (pid, tid);
    (key.user_stack, key.user_stack_err) = (user_stack, user_stack_err);
    (key.kernel_stack, key.kernel_stack_err) = (kernel_stack, kernel_stack_err);
    key.state = ThreadState::Running as u32;
    key.python_gil = python_gil;
    (key.go_labels, key.go_labels_identity) = go::labels(pid);
    thread_ctx::read(pid, key, Scratch::Sampling);
    let mut weight = aggregate::weight(1, 0, 0);
    weight.comm = bpf_get_current_comm().unwrap_or([0u8; COMM_LEN]);
    aggregate::add(slot.samples, key, &weight);
}

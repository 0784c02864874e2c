//! On-CPU sampling: one cpu-clock tick adds one sample to its thread's
//! (stacks, state = running) key.
use aya_ebpf::{helpers::bpf_get_current_comm, programs::PerfEventContext};
use profiler_common::{
    sample::{COMM_LEN, ThreadState},
    stack::NO_STACK,
    stats::Stat,
    unwind::Regs,
};

use crate::{aggregate, go, maps, maps::Scratch, stack, target, thread_ctx, unwind};

pub fn record(ctx: &PerfEventContext) {
    let Some((pid, tid)) = target::current() else {
        return;
    };
    maps::count(Stat::OnCpuSamples, 1);
    let slot = maps::active_slot();
    let interrupted = interrupted_user(ctx);
    let runtimes = maps::runtimes(pid);
    let (user_stack, user_stack_err, python_gil) =
        unwind::capture_user_from(&slot, pid, runtimes, Scratch::Sampling, interrupted);
    // A sample in user mode has no kernel stack (perf walks none): the
    // helper would find that out at the cost of a call.
    let (kernel_stack, kernel_stack_err) = if interrupted.is_some() {
        (NO_STACK, 0)
    } else {
        stack::capture_current(ctx, &slot, 0, Stat::KernelStackErrors, Scratch::Sampling)
    };
    let Some(key) = maps::key_scratch(Scratch::Sampling) else {
        return;
    };
    (key.pid, key.tid) = (pid, tid);
    (key.user_stack, key.user_stack_err) = (user_stack, user_stack_err);
    (key.kernel_stack, key.kernel_stack_err) = (kernel_stack, kernel_stack_err);
    key.state = ThreadState::Running as u32;
    key.python_gil = python_gil;
    let goroutine = go::of_thread(pid, runtimes, true);
    (key.go_labels, key.go_labels_identity) = (goroutine.labels, goroutine.identity);
    key.goroutine = goroutine.goroutine;
    thread_ctx::read(pid, runtimes, key, Scratch::Sampling);
    let mut weight = aggregate::weight(1, 0, 0);
    weight.comm = bpf_get_current_comm().unwrap_or([0u8; COMM_LEN]);
    aggregate::add(slot.samples, key, &weight);
}

/// The registers the sample interrupted, when it interrupted user mode
/// (the thread's saved user registers are the same ones then); `None` in
/// the kernel.
#[inline(always)]
fn interrupted_user(ctx: &PerfEventContext) -> Option<Regs> {
    // SAFETY: `ctx.ctx` is the program's `bpf_perf_event_data`, whose
    // `regs` the verifier lets the program read directly.
    let regs = unsafe { &(*ctx.ctx).regs };
    // A user context runs in ring 3.
    (regs.cs & 3 == 3).then_some(Regs {
        pc: regs.rip,
        sp: regs.rsp,
        bp: regs.rbp,
    })
}

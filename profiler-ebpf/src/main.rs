//! Kernel side of the profiler: program entry points only.
//!
//! Each entry point forwards to the module that holds its logic; all maps
//! live in `maps.rs`.
#![no_std]
#![no_main]
// Atomic add on map values: BPF has no compare-and-swap, so core::sync's
// AtomicU64::fetch_add is not available on this target.
#![allow(internal_features)]
#![feature(core_intrinsics)]
// The verifier and the hot path both prefer straight-line code: helpers are
// small and meant to be inlined into the program that calls them.
#![expect(
    clippy::inline_always,
    reason = "eBPF helpers inline into their program"
)]

mod aggregate;
mod fields;
mod go;
mod go_wake;
mod java;
mod maps;
mod off_cpu;
mod on_cpu;
mod process_seen;
mod python;
mod sched_info;
mod stack;
mod target;
mod task_storage;
mod thread_ctx;
mod tls;
mod unwind;
mod vma;

use aya_ebpf::{
    macros::{btf_tracepoint, perf_event, uprobe},
    programs::{BtfTracePointContext, PerfEventContext, ProbeContext},
};

/// Runs on every cpu-clock tick on every CPU.
#[perf_event]
#[expect(
    clippy::needless_pass_by_value,
    reason = "the macro fixes the signature"
)]
pub fn on_cpu_sample(ctx: PerfEventContext) -> u32 {
    on_cpu::record(&ctx);
    0
}

/// Every context switch on every CPU.
#[btf_tracepoint(function = "sched_switch")]
#[expect(
    clippy::needless_pass_by_value,
    reason = "the macro fixes the signature"
)]
pub fn sched_switch(ctx: BtfTracePointContext) -> i32 {
    off_cpu::on_switch(&ctx);
    0
}

/// A thread is being woken, in its waker's context (attached with
/// `--wakers` only).
#[btf_tracepoint(function = "sched_waking")]
#[expect(
    clippy::needless_pass_by_value,
    reason = "the macro fixes the signature"
)]
pub fn sched_waking(ctx: BtfTracePointContext) -> i32 {
    off_cpu::on_waking(&ctx);
    0
}

/// A Go target's `runtime.ready`: a goroutine is made runnable by the
/// current one (attached per Go binary with `--goroutine-wakers` only).
#[uprobe]
#[expect(
    clippy::needless_pass_by_value,
    reason = "the macro fixes the signature"
)]
pub fn go_ready(ctx: ProbeContext) -> u32 {
    go_wake::on_ready(&ctx);
    0
}

/// A thread registered with rseq returns to user space after it was
/// switched out; returns at once unless weight is pending.
#[btf_tracepoint(function = "rseq_update")]
pub fn rseq_update(_ctx: BtfTracePointContext) -> i32 {
    off_cpu::on_return_to_user(off_cpu::Flush::Rseq);
    0
}

/// Every system call return (only attached without `rseq_update`, or with
/// `--off-cpu-sys-exit`); returns at once unless weight is pending.
#[btf_tracepoint(function = "sys_exit")]
pub fn sys_exit(_ctx: BtfTracePointContext) -> i32 {
    off_cpu::on_return_to_user(off_cpu::Flush::SysExit);
    0
}

/// A process replaced its image (execve):
/// sched_process_exec(task_struct *p, pid_t old_pid, linux_binprm *bprm).
#[btf_tracepoint(function = "sched_process_exec")]
#[expect(
    clippy::needless_pass_by_value,
    reason = "the macro fixes the signature"
)]
pub fn sched_process_exec(ctx: BtfTracePointContext) -> i32 {
    target::on_exec();
    let old_tid: u32 = ctx.arg(1);
    off_cpu::on_exec(old_tid);
    0
}

/// A thread was renamed, or named after the program it execs:
/// task_rename(task_struct *task, const char *comm).
#[btf_tracepoint(function = "task_rename")]
#[expect(
    clippy::needless_pass_by_value,
    reason = "the macro fixes the signature"
)]
pub fn task_rename(ctx: BtfTracePointContext) -> i32 {
    off_cpu::on_rename(ctx.arg(0), ctx.arg(1));
    0
}

/// Tasks moved to another cgroup (`cgroup_attach_task`,
/// `cgroup_transfer_tasks`) or a cgroup was renamed (`cgroup_rename`); one
/// program per tracepoint, all the same.
#[btf_tracepoint(function = "cgroup_attach_task")]
pub fn cgroup_attach_task(_ctx: BtfTracePointContext) -> i32 {
    process_seen::moved();
    0
}

#[btf_tracepoint(function = "cgroup_transfer_tasks")]
pub fn cgroup_transfer_tasks(_ctx: BtfTracePointContext) -> i32 {
    process_seen::moved();
    0
}

#[btf_tracepoint(function = "cgroup_rename")]
pub fn cgroup_rename(_ctx: BtfTracePointContext) -> i32 {
    process_seen::moved();
    0
}

/// A thread exits.
#[btf_tracepoint(function = "sched_process_exit")]
pub fn sched_process_exit(_ctx: BtfTracePointContext) -> i32 {
    off_cpu::on_exit();
    unwind::on_exit();
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";

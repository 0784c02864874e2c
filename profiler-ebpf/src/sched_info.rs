//! Fields of a `task_struct` read at the offsets the daemon resolved: the
//! scheduler's own run-queue accounting of a thread (see
//! `profiler_common::sched`), its run queue's clock, and its ids.
//!
//! The offsets are a frozen read-only global, so the verifier knows them
//! as constants: each read is a plain load at a known offset of a
//! `task_struct` (checked against the kernel's BTF), no helper call.
use aya_ebpf::bindings::task_struct;
use profiler_common::sched::queued_ns;

use crate::maps;

/// `task`'s `sched_info.run_delay`: its run-queue waits so far, in ns.
#[inline(always)]
pub fn run_delay(task: *mut task_struct) -> u64 {
    let run_delay = maps::sched_offset(|o| &o.run_delay);
    // SAFETY: `task` is a task pointer the verifier knows (a tp_btf
    // argument) and the offset is that of a u64 field of it, which the
    // verifier checks against the kernel's BTF.
    unsafe { load(task.cast(), run_delay) }
}

/// The run-queue time of `next`, being switched in at `sched_switch` at
/// run-queue clock `clock`, since it left the CPU with `run_delay_out`.
#[inline(always)]
pub fn queued_since(next: *mut task_struct, run_delay_out: u64, clock: u64) -> u64 {
    let task: *const u8 = next.cast();
    // SAFETY: as in `run_delay`.
    unsafe {
        let run_delay_now: u64 = load(task, maps::sched_offset(|o| &o.run_delay));
        let last_queued: u64 = load(task, maps::sched_offset(|o| &o.last_queued));
        queued_ns(run_delay_out, run_delay_now, last_queued, clock)
    }
}

/// The clock of the run queue `task` is on (`rq->clock`), which the
/// scheduler has just updated when `sched_switch` fires.
#[inline(always)]
pub fn rq_clock(task: *mut task_struct) -> u64 {
    // SAFETY: each load is of a field the verifier checks against the
    // kernel's BTF, from the task to its CFS run queue to the CPU's run
    // queue; a bad pointer on the way reads as zero rather than faulting
    // (loads through untrusted BTF pointers are guarded).
    unsafe {
        let cfs_rq: *const u8 = load(task.cast(), maps::sched_offset(|o| &o.cfs_rq));
        let rq: *const u8 = load(cfs_rq, maps::sched_offset(|o| &o.rq));
        load(rq, maps::sched_offset(|o| &o.clock))
    }
}

/// `PF_KTHREAD` and `PF_USER_WORKER` from `linux/sched.h`.
const PF_KTHREAD: u32 = 0x0020_0000;
const PF_USER_WORKER: u32 = 0x0000_4000;

/// Whether `task` never returns to user space: a kernel thread, or a
/// kernel worker of a user process (io_uring).
#[inline(always)]
pub fn stays_in_kernel(task: *mut task_struct) -> bool {
    // SAFETY: as in `run_delay`, for an unsigned int field.
    let flags: u32 = unsafe { load(task.cast(), maps::sched_offset(|o| &o.flags)) };
    flags & (PF_KTHREAD | PF_USER_WORKER) != 0
}

/// `task`'s thread id (its `pid` field): what the low half of
/// `bpf_get_current_pid_tgid` is for the current thread, without the
/// helper call and for any task.
#[inline(always)]
pub fn tid(task: *mut task_struct) -> u32 {
    // SAFETY: as in `run_delay`, for a pid_t field.
    unsafe { load(task.cast(), maps::sched_offset(|o| &o.pid)) }
}

/// `task`'s process id (its `tgid` field), as [`tid`] is its thread id.
#[inline(always)]
pub fn pid(task: *mut task_struct) -> u32 {
    // SAFETY: as in `run_delay`, for a pid_t field.
    unsafe { load(task.cast(), maps::sched_offset(|o| &o.tgid)) }
}

/// The `T` at byte `offset` of `base`. The address is computed without
/// Rust's in-bounds assumption: `base` may be a pointer read through
/// another load, which reads as null if it faults.
///
/// # Safety
/// `base + offset` must be a field of type `T` that the verifier accepts
/// (its guarded loads turn a bad address into zero, not a fault).
#[inline(always)]
unsafe fn load<T: Copy>(base: *const u8, offset: u32) -> T {
    // SAFETY: the caller's contract.
    unsafe { core::ptr::read_volatile(base.wrapping_add(offset as usize).cast::<T>()) }
}

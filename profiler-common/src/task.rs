//! Per-thread off-CPU bookkeeping, kept by the kernel in
//! [`crate::maps::TASKS`]: task storage, a value hanging off the thread's
//! own `task_struct`.
//!
//! Every hook has the task pointer without reading task fields
//! (`sched_switch`'s `prev`/`next`,
//! `bpf_get_current_task_btf()` in the thread's own context), and finding
//! the value from it is a pointer dereference rather than a hash lookup.
//! The kernel frees the value with the thread; userspace reads it through
//! a pidfd of the thread.

use crate::sample::COMM_LEN;

/// One tracked thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskState {
    /// When the thread left the CPU (ktime ns, converted from the run
    /// queue's clock; for the window logic); 0 while it is on a CPU.
    pub off_since_ns: u64,
    /// The same instant in the run queue's clock (`rq->clock`), which the
    /// interval's length is measured in.
    pub off_since_clock: u64,
    /// The scheduler's `sched_info.run_delay` when it left the CPU, to
    /// tell the run-queue waits since (see [`crate::sched`]).
    pub run_delay_ns: u64,
    pub pid: u32,
    pub tid: u32,
    /// `ThreadState` it left the CPU in.
    pub state: u32,
    /// Non-zero when kept weight waits for the thread's user stack, which
    /// can only be read in the thread's own context (see `profiler-ebpf`).
    pub pending: u8,
    /// Non-zero once the thread's weight was flushed on its way back to
    /// user space (by task work, or at `rseq_update`: then it is
    /// registered with rseq). A flush at a later switch-out is then not
    /// counted as approximate.
    pub rseq: u8,
    pub pad: u16,
    /// Kernel stack of the pending weight (hash, or `NO_STACK`).
    pub kernel_stack: u64,
    /// 0, or the errno of the failed kernel stack capture.
    pub kernel_stack_err: i32,
    /// `ThreadState` of the pending blocked part (sleeping or disk).
    pub pending_state: u32,
    /// Pending weight of the blocked part.
    pub blocked_ns: u64,
    pub blocked_count: u64,
    /// Pending weight of the run-queue part.
    pub runqueue_ns: u64,
    pub runqueue_count: u64,
    /// The thread's name when it was first seen.
    pub comm: [u8; COMM_LEN],
}

#[cfg(feature = "user")]
// SAFETY: TaskState is repr(C) with no padding (u64s, pairs of 32-bit
// fields, two u8 and a u16 in one 32-bit slot, then 16 bytes) and every
// bit pattern is valid.
unsafe impl aya::Pod for TaskState {}

// The layout both sides agree on, checked wherever this crate is built
// (the eBPF target included): no padding, the size the kernel allocates.
const _: () = assert!(size_of::<TaskState>() == 104);

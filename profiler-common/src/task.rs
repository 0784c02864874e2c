//! Per-thread off-CPU bookkeeping, kept by the kernel in two places:
//!
//! - [`crate::maps::TASKS`]: task storage, a value hanging off the thread's
//!   own `task_struct`. Every hook has the task pointer without reading
//!   task fields (`sched_switch`'s `prev`/`next`,
//!   `bpf_get_current_task_btf()` in the thread's own context), and
//!   finding the value from it is a pointer dereference rather than a hash
//!   lookup, but still a helper call. The kernel frees the value with the
//!   thread; userspace reads it through a pidfd of the thread.
//! - [`crate::maps::INTERVAL_CELLS`]: the thread's open interval, the only
//!   state every switch reads or writes, in an array cell picked by its tid
//!   ([`crate::maps::interval_cell`]). An array read is inlined by the
//!   verifier, so a switch of a tracked thread costs no helper call. A cell
//!   belongs to the first tracked thread that claims it until that thread
//!   exits; a thread whose cell is taken keeps its interval in its
//!   [`TaskState`] instead.

use crate::{sample::COMM_LEN, waker::WakerRecord};

/// An off-CPU interval that has begun and not yet ended: how and when a
/// thread left the CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenInterval {
    /// When the thread left the CPU (ktime ns, converted from the run
    /// queue's clock; for the window logic); 0 while it is on a CPU.
    pub off_since_ns: u64,
    /// The same instant in the run queue's clock (`rq->clock`), which the
    /// interval's length is measured in.
    pub off_since_clock: u64,
    /// The scheduler's `sched_info.run_delay` when it left the CPU, to
    /// tell the run-queue waits since (see [`crate::sched`]).
    pub run_delay_ns: u64,
    /// How it left the CPU: the scheduler's `prev_state`, or 0 if it was
    /// preempted. Classified by [`crate::sample::ThreadState::off_cpu`]
    /// only if the interval is kept.
    pub left_with: u32,
    /// The sampling rule's threshold, drawn when the thread left the CPU
    /// ([`crate::off_cpu::threshold`]): the interval is kept if it lasts
    /// longer. Drawn ahead, so that the switch-in of an interval that is
    /// dropped (nearly all short ones) is one comparison.
    pub keep_after_ns: u32,
}

/// One cell of [`crate::maps::INTERVAL_CELLS`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntervalCell {
    /// The tid of the thread whose interval this is; 0 while free. 64 bits
    /// wide: the eBPF target's atomics are 64-bit.
    pub owner: u64,
    /// A copy of its [`TaskState::pending`], so that a switch-out only
    /// looks the thread's task storage up when there is weight to flush.
    pub pending: u32,
    pub pad: u32,
    pub open: OpenInterval,
}

/// One tracked thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskState {
    /// Its open interval, unless it owns an [`IntervalCell`] (then the
    /// cell's is the one in use, and this one stays closed).
    pub open: OpenInterval,
    pub pid: u32,
    pub tid: u32,
    /// Non-zero when kept weight waits for the thread's user stack, which
    /// can only be read in the thread's own context (see `profiler-ebpf`).
    pub pending: u8,
    /// Non-zero once the thread's weight was flushed on its way back to
    /// user space (by task work, or at `rseq_update`: then it is
    /// registered with rseq). A flush at a later switch-out is then not
    /// counted as approximate.
    pub rseq: u8,
    /// Non-zero while task work to flush the pending weight is scheduled
    /// (`profiler-ebpf`'s `off_cpu/task_work.rs`): a switch-out where the thread
    /// was preempted leaves the flush to it.
    pub work_scheduled: u8,
    /// Non-zero when [`TaskState::waker`] woke the interval whose blocked
    /// weight is pending (`--wakers`).
    pub waker_pending: u8,
    /// 0, or the errno of the failed kernel stack capture.
    pub kernel_stack_err: i32,
    /// Kernel stack of the pending weight (hash, or `NO_STACK`).
    pub kernel_stack: u64,
    /// `ThreadState` of the pending blocked part (sleeping or disk).
    pub pending_state: u32,
    /// How long noting [`TaskState::waker`] delayed the wakeup of interval
    /// [`TaskState::waker_interval`] (`--wakers`): its keep decision and
    /// weight leave that out, so that noting does not make the intervals
    /// it notes longer, and likelier kept.
    pub waker_delay_ns: u32,
    /// Pending weight of the blocked part.
    pub blocked_ns: u64,
    pub blocked_count: u64,
    /// Pending weight of the run-queue part.
    pub runqueue_ns: u64,
    pub runqueue_count: u64,
    /// The thread's name: taken when it is first tracked, kept current at
    /// renames and exec (`profiler-ebpf`'s `off_cpu/thread_identity.rs`).
    pub comm: [u8; COMM_LEN],
    /// `off_since_ns` of the interval [`TaskState::waker`] ended (`--wakers`).
    pub waker_interval: u64,
    /// The last waker noted for an interval past its threshold.
    pub waker: WakerRecord,
}

#[cfg(feature = "user")]
// SAFETY: TaskState is repr(C) with no padding (u64s, pairs of 32-bit
// fields, four u8 in one 32-bit slot, 16 bytes, a u64, then a 48-byte
// WakerRecord) and every bit pattern is valid.
unsafe impl aya::Pod for TaskState {}

#[cfg(feature = "user")]
// SAFETY: IntervalCell is repr(C) with no padding (a u64, two u32, three
// u64, two u32) and every bit pattern is valid.
unsafe impl aya::Pod for IntervalCell {}

// The layouts both sides agree on, checked wherever this crate is built
// (the eBPF target included): no padding, the sizes the kernel allocates.
const _: () = assert!(size_of::<TaskState>() == 168);
const _: () = assert!(size_of::<IntervalCell>() == 48);

/// The kernel's opaque `struct bpf_task_work`: a map value field the
/// verifier recognises by this BTF name.
#[repr(C)]
pub struct bpf_task_work {
    opaque: u64,
}

/// A `TASK_WORK` value (`profiler-ebpf`'s `off_cpu/task_work.rs`): one thread's
/// task work.
#[repr(C)]
pub struct TaskWork {
    pub work: bpf_task_work,
}

impl TaskWork {
    /// A value never scheduled (the kernel keeps its state in `opaque`).
    #[must_use]
    pub const fn idle() -> Self {
        Self {
            work: bpf_task_work { opaque: 0 },
        }
    }
}

//! The aggregation key and value the kernel writes per window.

/// Length of a kernel task name (`TASK_COMM_LEN`).
pub const COMM_LEN: usize = 16;

/// What a thread was doing while the weight was taken.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThreadState {
    /// On a CPU (`perf_event` sample).
    Running = 0,
    /// Blocked until woken, interruptibly (S).
    Sleeping = 1,
    /// Blocked uninterruptibly (D), typically waiting for disk I/O.
    Disk = 2,
    /// Runnable, waiting for a CPU: preempted, or woken but not yet running.
    Runqueue = 3,
    /// Not known: weight the kernel could not store (see `[lost …]` frames).
    Unknown = 4,
}

impl ThreadState {
    /// Decodes the `state` field of a [`SampleKey`].
    #[must_use]
    pub const fn from_raw(raw: u32) -> Option<Self> {
        match raw {
            0 => Some(Self::Running),
            1 => Some(Self::Sleeping),
            2 => Some(Self::Disk),
            3 => Some(Self::Runqueue),
            4 => Some(Self::Unknown),
            _ => None,
        }
    }

    /// The state of a thread that left the CPU with `left_with`: the
    /// scheduler's `prev_state` at `sched_switch`, or 0 if it was
    /// preempted (see [`crate::task::OpenInterval::left_with`]). The switch-out
    /// only stores the bits; the few intervals that are kept are classified.
    #[must_use]
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    pub const fn off_cpu(left_with: u32) -> Self {
        // From `linux/sched.h`. A task with both uninterruptible bits is an
        // idle kernel thread (TASK_IDLE), not a disk wait.
        const TASK_UNINTERRUPTIBLE: u32 = 0x2;
        const TASK_NOLOAD: u32 = 0x400;
        if left_with == 0 {
            Self::Runqueue
        } else if left_with & (TASK_UNINTERRUPTIBLE | TASK_NOLOAD) == TASK_UNINTERRUPTIBLE {
            Self::Disk
        } else {
            Self::Sleeping
        }
    }

    /// The pprof `state` label value.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Sleeping => "sleeping",
            Self::Disk => "disk",
            Self::Runqueue => "runqueue",
            Self::Unknown => "unknown",
        }
    }
}

/// Aggregation key: one thread, one pair of stacks, one state.
///
/// A stack is the content hash under which the slot's stack map holds it
/// (see [`crate::stack`]), or [`crate::stack::NO_STACK`]. With no stack, the
/// matching `*_err` field says why: 0 when there is no such context (a
/// kernel thread has no user stack), else the negative errno of the failed
/// capture, kept so the weight still shows up under a frame that says why
/// its stack is missing.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SampleKey {
    /// Process id (kernel tgid).
    pub pid: u32,
    /// Thread id (kernel pid).
    pub tid: u32,
    /// Hash of the user stack, or `NO_STACK`.
    pub user_stack: u64,
    /// Hash of the kernel stack, or `NO_STACK`.
    pub kernel_stack: u64,
    /// 0, or the negative errno of a failed user stack capture.
    pub user_stack_err: i32,
    /// 0, or the negative errno of a failed kernel stack capture.
    pub kernel_stack_err: i32,
    /// A [`ThreadState`] as `u32`.
    pub state: u32,
    /// In a Python thread, whether it held the GIL
    /// ([`crate::python::gil`]); 0 elsewhere.
    pub python_gil: u32,
    /// In a Go thread's sample, the label set of the goroutine it ran
    /// (`g.labels`, see [`crate::go`]) and the set's identity then; 0
    /// elsewhere.
    pub go_labels: u64,
    pub go_labels_identity: u64,
    /// With `--goroutine-wakers`, in a Go thread's on-CPU sample, the id
    /// of the goroutine it ran (`g.m.curg.goid`), so that the critical
    /// path finds a goroutine's own CPU time; 0 elsewhere.
    pub goroutine: u64,
    /// The OpenTelemetry trace and span the thread ran in at the sample
    /// ([`crate::thread_ctx`]); zeros for none.
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// The attributes of that thread's context record: their hash in
    /// `THREAD_ATTRS` ([`crate::thread_ctx::ThreadAttrs`]); 0 for none.
    pub thread_attrs: u64,
    /// Who woke the thread, for blocked weight with `--wakers`: the hash
    /// of its [`crate::waker::WakerRecord`] in the slot's wakers map, or
    /// [`crate::waker::UNKNOWN`]; [`crate::waker::NONE`] elsewhere.
    pub waker: u64,
}

/// Aggregated weight of one [`SampleKey`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleValue {
    /// Number of on-CPU samples.
    pub samples: u64,
    /// Debiased off-CPU nanoseconds.
    pub off_cpu_ns: u64,
    /// Debiased off-CPU events, in `off_cpu::COUNT_SCALE` units.
    pub off_cpu_count: u64,
    /// The thread's name when the key was first seen.
    pub comm: [u8; COMM_LEN],
}

#[cfg(feature = "user")]
mod pod {
    use super::{SampleKey, SampleValue};

    // SAFETY: SampleKey is repr(C) with no padding (two u32, two u64, four
    // 32-bit fields, `python_gil` included, then three u64, 24 bytes and
    // two u64: 104 bytes) and every bit pattern is valid.
    unsafe impl aya::Pod for SampleKey {}
    // SAFETY: SampleValue is repr(C): three u64 then 16 bytes, 40 bytes
    // with no padding, and every bit pattern is valid.
    unsafe impl aya::Pod for SampleValue {}
}

/// Name of the thread as a string, up to the first NUL.
#[must_use]
pub fn comm_str(comm: &[u8; COMM_LEN]) -> &[u8] {
    let end = comm.iter().position(|&b| b == 0).unwrap_or(COMM_LEN);
    &comm[..end]
}

/// A process name as the kernel stores it: cut to `COMM_LEN - 1` bytes,
/// NUL-padded (the key of the `TARGET_COMMS` map).
#[must_use]
pub fn comm_key(name: &str) -> [u8; COMM_LEN] {
    let mut key = [0u8; COMM_LEN];
    let len = name.len().min(COMM_LEN - 1);
    key[..len].copy_from_slice(&name.as_bytes()[..len]);
    key
}

// The layouts both sides agree on, checked wherever this crate is built
// (the eBPF target included): no padding.
const _: () = assert!(size_of::<SampleKey>() == 104);
const _: () = assert!(size_of::<SampleValue>() == 40);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_stops_at_nul() {
        let mut comm = [0u8; COMM_LEN];
        comm[..4].copy_from_slice(b"spin");
        assert_eq!(comm_str(&comm), b"spin");
        assert_eq!(comm_str(&[b'x'; COMM_LEN]).len(), COMM_LEN);
    }

    #[test]
    fn comm_keys_are_cut_as_the_kernel_cuts_names() {
        assert_eq!(comm_str(&comm_key("short_lived")), b"short_lived");
        let long = comm_key("a-very-long-process-name");
        assert_eq!(comm_str(&long), b"a-very-long-pro");
        assert_eq!(long[COMM_LEN - 1], 0, "always NUL-terminated");
    }

    #[test]
    fn state_round_trips() {
        for state in [
            ThreadState::Running,
            ThreadState::Sleeping,
            ThreadState::Disk,
            ThreadState::Runqueue,
            ThreadState::Unknown,
        ] {
            assert_eq!(ThreadState::from_raw(state as u32), Some(state));
        }
        assert_eq!(ThreadState::from_raw(99), None);
    }

    #[test]
    fn off_cpu_state_follows_the_schedulers_bits() {
        // 0: preempted, or runnable when it left (TASK_RUNNING).
        assert_eq!(ThreadState::off_cpu(0), ThreadState::Runqueue);
        // TASK_INTERRUPTIBLE, and with TASK_FREEZABLE-style extra bits.
        assert_eq!(ThreadState::off_cpu(0x1), ThreadState::Sleeping);
        assert_eq!(ThreadState::off_cpu(0x1 | 0x8000), ThreadState::Sleeping);
        // TASK_UNINTERRUPTIBLE, and TASK_KILLABLE (| TASK_WAKEKILL).
        assert_eq!(ThreadState::off_cpu(0x2), ThreadState::Disk);
        assert_eq!(ThreadState::off_cpu(0x2 | 0x100), ThreadState::Disk);
        // TASK_IDLE (uninterruptible | TASK_NOLOAD) does not count as disk.
        assert_eq!(ThreadState::off_cpu(0x2 | 0x400), ThreadState::Sleeping);
        // Stopped or traced (__TASK_STOPPED, __TASK_TRACED).
        assert_eq!(ThreadState::off_cpu(0x4), ThreadState::Sleeping);
        assert_eq!(ThreadState::off_cpu(0x8), ThreadState::Sleeping);
    }
}

//! Who woke a thread whose off-CPU interval was kept (`--wakers`).
//!
//! At `sched_waking`, in the waker's context, the kernel notes the waker
//! in the woken thread's [`crate::task::TaskState`], but only for an
//! interval already past the threshold the sampling rule drew for it
//! (see `profiler-ebpf`'s `off_cpu/waker.rs`): intervals that are dropped
//! cost one comparison. When the interval's blocked weight is flushed, the
//! record is stored once per window under its hash ([`record_hash`]) in
//! the slot's wakers map, and the blocked weight's
//! [`crate::sample::SampleKey::waker`] names it.

use crate::{
    hash::{finish, mix},
    sample::COMM_LEN,
    stack::NO_STACK,
};

/// `SampleKey::waker` of weight without a waker: on-CPU samples, run-queue
/// waits, and every row when wakers are not recorded.
pub const NONE: u64 = 0;
/// `SampleKey::waker` of blocked weight whose waker was not recorded: its
/// interval was still under its threshold when it was woken (the run-queue
/// wait after the wakeup carried it over), or the record could not be
/// stored. Shown as `[woken by unknown]`.
pub const UNKNOWN: u64 = u64::MAX;

/// The thread that woke a blocked one, as it was at the wakeup.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WakerRecord {
    /// Process and thread ids of the current task at the wakeup (for a
    /// wakeup from an interrupt, the task it interrupted, or 0 for idle).
    pub pid: u32,
    pub tid: u32,
    /// Its user stack (hash in the slot's stack map, or `NO_STACK`).
    pub user_stack: u64,
    /// Its kernel stack, which shows an interrupt's path.
    pub kernel_stack: u64,
    /// 0, or the negative errno of a failed capture.
    pub user_stack_err: i32,
    pub kernel_stack_err: i32,
    /// Its name.
    pub comm: [u8; COMM_LEN],
}

#[cfg(feature = "user")]
// SAFETY: WakerRecord is repr(C) with no padding (two u32, two u64, two
// i32, 16 bytes: 48 bytes) and every bit pattern is valid.
unsafe impl aya::Pod for WakerRecord {}

const _: () = assert!(size_of::<WakerRecord>() == 48);

/// The key a record is stored under: the same for the same waker with the
/// same stacks, and never [`NONE`] or [`UNKNOWN`].
#[must_use]
pub fn record_hash(record: &WakerRecord) -> u64 {
    // One word at a time, no array: the kernel's callers have little stack.
    let mut hash = mix(0, (u64::from(record.pid) << 32) | u64::from(record.tid));
    hash = mix(hash, record.user_stack);
    hash = mix(hash, record.kernel_stack);
    hash = mix(
        hash,
        (u64::from(record.user_stack_err.cast_unsigned()) << 32)
            | u64::from(record.kernel_stack_err.cast_unsigned()),
    );
    hash = mix(hash, u64::from_le_bytes(first_half(&record.comm)));
    hash = mix(hash, u64::from_le_bytes(second_half(&record.comm)));
    let hash = finish(hash);
    if hash == NONE || hash == UNKNOWN {
        1
    } else {
        hash
    }
}

#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
const fn first_half(comm: &[u8; COMM_LEN]) -> [u8; 8] {
    [
        comm[0], comm[1], comm[2], comm[3], comm[4], comm[5], comm[6], comm[7],
    ]
}

#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
const fn second_half(comm: &[u8; COMM_LEN]) -> [u8; 8] {
    [
        comm[8], comm[9], comm[10], comm[11], comm[12], comm[13], comm[14], comm[15],
    ]
}

impl WakerRecord {
    /// No waker noted.
    #[must_use]
    pub const fn empty() -> Self {
        Self {
            pid: 0,
            tid: 0,
            user_stack: NO_STACK,
            kernel_stack: NO_STACK,
            user_stack_err: 0,
            kernel_stack_err: 0,
            comm: [0; COMM_LEN],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(tid: u32, user_stack: u64) -> WakerRecord {
        WakerRecord {
            pid: 7,
            tid,
            user_stack,
            kernel_stack: 3,
            comm: *b"producer\0\0\0\0\0\0\0\0",
            ..WakerRecord::empty()
        }
    }

    #[test]
    fn equal_records_share_a_hash_and_others_do_not() {
        assert_eq!(record_hash(&record(8, 1)), record_hash(&record(8, 1)));
        assert_ne!(record_hash(&record(8, 1)), record_hash(&record(9, 1)));
        assert_ne!(record_hash(&record(8, 1)), record_hash(&record(8, 2)));
        let mut renamed = record(8, 1);
        renamed.comm[15] = b'x';
        assert_ne!(record_hash(&record(8, 1)), record_hash(&renamed));
    }

    #[test]
    fn a_hash_is_never_a_marker() {
        for tid in 0..10_000 {
            let hash = record_hash(&record(tid, u64::from(tid)));
            assert!(hash != NONE && hash != UNKNOWN);
        }
    }
}

//! Go's goroutine wakers (`--goroutine-wakers`): which goroutine made a
//! parked one runnable, and where it was.
//!
//! A uprobe on `runtime.ready` (every `goready` ends there: a channel
//! send to a waiting receiver, a mutex or semaphore release, a
//! `WaitGroup`'s last `Done`, a timer's expiry) runs on the waker's
//! thread, on its system stack (`systemstack` switched there). The
//! goroutine it makes runnable is `ready`'s first argument (`AX`, Go's
//! register ABI); the waking goroutine is `g.m.curg`, whose saved context
//! (`g.sched`, which `systemstack` writes before it switches) holds the
//! stack it was on: the frame pointer chain from `sched.bp`, the frame
//! that called `systemstack` (Go keeps frame pointers on amd64). The
//! kernel keeps the last wakeup of each goroutine ([`GoWake`], by
//! [`GoWakeKey`]); the goroutine reader looks a parked goroutine up once
//! its wait has ended.

/// Frames kept of a waker's stack.
pub const GO_WAKE_FRAMES: usize = 32;

/// The goroutine woken: its process and goroutine id.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GoWakeKey {
    pub pid: u32,
    /// Zero: the struct has no padding.
    pub reserved: u32,
    pub goid: u64,
}

/// A goroutine's last wakeup.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoWake {
    /// When (`CLOCK_MONOTONIC`, ns): the kernel's `bpf_ktime_get_ns`.
    pub time_ns: u64,
    /// The waking goroutine's id; 0 when the thread ran no goroutine (the
    /// scheduler's own work: timers run from `findRunnable`, the network
    /// poller).
    pub waker_goid: u64,
    /// The thread the wakeup ran on.
    pub tid: u32,
    /// Frames in `frames` (none without a waking goroutine).
    pub frames_len: u32,
    /// The waking goroutine's PCs, leaf first: the call into the runtime's
    /// system stack (the byte before its return address), then its
    /// callers' return addresses.
    pub frames: [u64; GO_WAKE_FRAMES],
}

impl GoWake {
    /// An empty record, which the kernel inserts and then fills in place.
    pub const EMPTY: Self = Self {
        time_ns: 0,
        waker_goid: 0,
        tid: 0,
        frames_len: 0,
        frames: [0; GO_WAKE_FRAMES],
    };

    /// The waker's frames.
    #[must_use]
    pub fn frames(&self) -> &[u64] {
        let len = (self.frames_len as usize).min(GO_WAKE_FRAMES);
        &self.frames[..len]
    }
}

const _: () = assert!(size_of::<GoWake>() == 24 + 8 * GO_WAKE_FRAMES);

#[cfg(feature = "user")]
mod pod {
    use super::{GoWake, GoWakeKey};

    // SAFETY: repr(C): two u32 and a u64 (16 bytes), no padding; every
    // bit pattern is valid.
    unsafe impl aya::Pod for GoWakeKey {}
    // SAFETY: repr(C): two u64, two u32 and u64s (no padding, checked by
    // the size assertion); every bit pattern is valid.
    unsafe impl aya::Pod for GoWake {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_stop_at_their_length() {
        let mut wake = GoWake::EMPTY;
        wake.frames[..3].copy_from_slice(&[1, 2, 3]);
        wake.frames_len = 2;
        assert_eq!(wake.frames(), [1, 2]);
        wake.frames_len = 1_000;
        assert_eq!(wake.frames().len(), GO_WAKE_FRAMES);
    }
}

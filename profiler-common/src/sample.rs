//! The aggregation key and value the kernel writes per window.

/// Length of a kernel task name (`TASK_COMM_LEN`).
pub const COMM_LEN: usize = 16;

/// What a thread was doing while the weight was taken.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThreadState {
    /// On a CPU (`perf_event` sample).
    Running = 0,
}

impl ThreadState {
    /// Decodes the `state` field of a [`SampleKey`].
    #[must_use]
    pub const fn from_raw(raw: u32) -> Option<Self> {
        match raw {
            0 => Some(Self::Running),
            _ => None,
        }
    }

    /// The pprof `state` label value.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::Running => "running",
        }
    }
}

/// Aggregation key: one thread, one pair of stacks, one state.
///
/// Stack ids are the return values of `bpf_get_stackid`: a non-negative id
/// into the slot's stack map, or a negative errno when capture failed. The
/// errno is kept in the key so the weight still shows up, under a frame
/// that says why its stack is missing.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SampleKey {
    /// Process id (kernel tgid).
    pub pid: u32,
    /// Thread id (kernel pid).
    pub tid: u32,
    /// User stack id, or a negative errno.
    pub user_stack_id: i32,
    /// Kernel stack id, or a negative errno.
    pub kernel_stack_id: i32,
    /// A [`ThreadState`] as `u32`.
    pub state: u32,
    /// Explicit padding so the key has no uninitialised bytes.
    pub pad: u32,
}

/// Aggregated weight of one [`SampleKey`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleValue {
    /// Number of on-CPU samples.
    pub samples: u64,
    /// The thread's name when the key was first seen.
    pub comm: [u8; COMM_LEN],
}

#[cfg(feature = "user")]
mod pod {
    use super::{SampleKey, SampleValue};

    // SAFETY: SampleKey is repr(C), has no padding (six u32/i32 fields, pad
    // included) and every bit pattern is valid.
    unsafe impl aya::Pod for SampleKey {}
    // SAFETY: SampleValue is repr(C): a u64 followed by 16 bytes, 24 bytes
    // with no padding, and every bit pattern is valid.
    unsafe impl aya::Pod for SampleValue {}
}

/// Name of the thread as a string, up to the first NUL.
#[must_use]
pub fn comm_str(comm: &[u8; COMM_LEN]) -> &[u8] {
    let end = comm.iter().position(|&b| b == 0).unwrap_or(COMM_LEN);
    &comm[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_has_no_padding() {
        assert_eq!(size_of::<SampleKey>(), 24);
        assert_eq!(size_of::<SampleValue>(), 24);
    }

    #[test]
    fn comm_stops_at_nul() {
        let mut comm = [0u8; COMM_LEN];
        comm[..4].copy_from_slice(b"spin");
        assert_eq!(comm_str(&comm), b"spin");
        assert_eq!(comm_str(&[b'x'; COMM_LEN]).len(), COMM_LEN);
    }

    #[test]
    fn state_round_trips() {
        assert_eq!(
            ThreadState::from_raw(ThreadState::Running as u32),
            Some(ThreadState::Running)
        );
        assert_eq!(ThreadState::from_raw(99), None);
    }
}

//! Go in the kernel's on-CPU sample: what it reads of a Go process to
//! record the pprof label set of the goroutine the sampled thread runs
//! (`runtime/pprof.Do`). The thread's `g` is in its thread-local storage;
//! that `g` may be the thread's system stack's, so the sample follows
//! `g.m.curg`, the user goroutine the thread runs, to its `labels`. The
//! sample records the set's address and identity ([`set_identity`]); the
//! daemon reads the set itself, whole (`runtimes/go/labels.rs`), as soon
//! as the sample asks, and only while its identity is the one recorded.

/// How a Go version keeps a label set ([`GoProcess::form`]).
pub mod form {
    /// A `map[string]string` behind one pointer (Go 1.23 and before).
    pub const MAP: u32 = 0;
    /// A slice of key and value pairs (Go 1.24 and later).
    pub const SLICE: u32 = 1;
}

/// Where a Go process keeps what the sample reads (published per process
/// in `GO_PROCS`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GoProcess {
    /// The thread's `g` pointer, as an offset from its thread pointer
    /// (`fsbase`): -8 for most Go binaries on amd64.
    pub tls_g: i64,
    /// `g.m`, `m.curg` and `g.labels`.
    pub g_m: u32,
    pub m_curg: u32,
    pub g_labels: u32,
    /// A [`form`].
    pub form: u32,
    /// `g.goid` and `g.sched.bp`: what the goroutine wakers' probe reads
    /// (`crate::go_wake`, from its copy in `GO_BINARIES`); 0 when not
    /// known. In `GO_PROCS`, `g_goid` is set only with
    /// `--goroutine-wakers`: the on-CPU sample then records the goroutine
    /// (`crate::sample::SampleKey::goroutine`).
    pub g_goid: u32,
    pub g_sched_bp: u32,
}

/// A label set a sample recorded: its process, address and
/// [`set_identity`]. The walk asks the daemon to read each one it has not
/// seen (`GO_LABEL_REQUESTS`), so that the daemon reads it while it
/// lives.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LabelSetSeen {
    pub pid: u32,
    /// Zero: the struct has no padding.
    pub reserved: u32,
    pub address: u64,
    pub identity: u64,
}

/// What tells a label set from another made later at the same address,
/// from the words the sample and the daemon both read: for a map, the
/// pointer to its header and its hash seed (random per map); for a slice,
/// its storage, length and first key's and value's storage.
#[must_use]
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub const fn set_identity(words: [u64; 4]) -> u64 {
    words[0] ^ words[1].rotate_left(13) ^ words[2].rotate_left(29) ^ words[3].rotate_left(47)
}

/// Where the words of [`set_identity`] are. For a map: the header pointer
/// at the set's address, then the header's hash seed (a `u32`).
pub const MAP_HASH0: u64 = 12;
/// For a slice: the storage pointer and length at the set's address, then
/// the first pair's key and value pointers in the storage (a pair is two
/// 16-byte string headers).
pub const SLICE_LEN: u64 = 8;
pub const PAIR_VALUE: u64 = 16;

#[cfg(feature = "user")]
mod pod {
    use super::{GoProcess, LabelSetSeen};

    // SAFETY: repr(C): an i64 and six u32 (32 bytes), no padding; every
    // bit pattern is valid.
    unsafe impl aya::Pod for GoProcess {}
    // SAFETY: repr(C): two u32 and two u64 (24 bytes), no padding; every
    // bit pattern is valid.
    unsafe impl aya::Pod for LabelSetSeen {}
}

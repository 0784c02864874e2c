//! The content hash the kernel programs key their maps by: FxHash's step,
//! one word at a time, then a final avalanche (MurmurHash3's `fmix64`).
//! Kernel and userspace compute the same values.

/// One step: `word` mixed into `hash`.
#[must_use]
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub const fn mix(hash: u64, word: u64) -> u64 {
    (hash.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95)
}

/// The last step: every bit of `hash` moves every bit of the result.
#[must_use]
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub const fn finish(mut hash: u64) -> u64 {
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^ (hash >> 33)
}

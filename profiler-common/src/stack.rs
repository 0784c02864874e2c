//! Stacks stored by content: the kernel hashes the captured instruction
//! pointers and stores the trace under that hash.
//!
//! `BPF_MAP_TYPE_STACK_TRACE` refuses a stack whose bucket holds another one
//! (EEXIST), and a hot stack that collides loses every sample of the window.
//! A 64-bit content hash makes collisions negligible (n²/2⁶⁵) and needs no
//! bucket eviction.

/// Deepest stack captured (the kernel's `PERF_MAX_STACK_DEPTH`).
pub const MAX_STACK_DEPTH: usize = 127;

/// Hash that means "no stack": see the `*_stack_err` fields of the key.
pub const NO_STACK: u64 = 0;

/// [`StackTrace::flags`]: the stack went on past [`MAX_STACK_DEPTH`].
pub const TRUNCATED: u32 = 1;

/// One captured stack, as stored in the stack maps.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackTrace {
    /// Number of valid entries in `ips`.
    pub len: u32,
    /// [`TRUNCATED`] when the walk stopped at the frame limit.
    pub flags: u32,
    /// Instruction pointers, leaf first.
    pub ips: [u64; MAX_STACK_DEPTH],
}

// The layout both sides agree on, checked wherever this crate is built
// (the eBPF target included): no padding.
const _: () = assert!(size_of::<StackTrace>() == 8 + 8 * MAX_STACK_DEPTH);

impl StackTrace {
    /// Whether the walk stopped at the frame limit with frames left.
    #[must_use]
    pub const fn truncated(&self) -> bool {
        self.flags & TRUNCATED != 0
    }

    /// The valid instruction pointers, leaf first.
    #[must_use]
    pub fn frames(&self) -> &[u64] {
        let len = usize::try_from(self.len)
            .unwrap_or(MAX_STACK_DEPTH)
            .min(MAX_STACK_DEPTH);
        &self.ips[..len]
    }
}

/// Content hash of the first `len` entries of `ips`; never [`NO_STACK`].
///
/// Written as a fixed-bound loop so the eBPF verifier accepts it.
#[must_use]
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub fn stack_hash(ips: &[u64; MAX_STACK_DEPTH], len: usize) -> u64 {
    let mut hash = len as u64;
    let mut i = 0;
    while i < MAX_STACK_DEPTH {
        if i >= len {
            break;
        }
        hash = crate::hash::mix(hash, ips[i]);
        i += 1;
    }
    let hash = crate::hash::finish(hash);
    if hash == NO_STACK { 1 } else { hash }
}

#[cfg(feature = "user")]
// SAFETY: StackTrace is repr(C): two u32 then 127 u64s, no padding, and every
// bit pattern is valid.
unsafe impl aya::Pod for StackTrace {}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(frames: &[u64]) -> [u64; MAX_STACK_DEPTH] {
        let mut ips = [0; MAX_STACK_DEPTH];
        ips[..frames.len()].copy_from_slice(frames);
        ips
    }

    #[test]
    fn hash_depends_on_content_order_and_length() {
        let a = stack_hash(&trace(&[1, 2, 3]), 3);
        assert_eq!(a, stack_hash(&trace(&[1, 2, 3]), 3));
        assert_ne!(a, stack_hash(&trace(&[3, 2, 1]), 3));
        assert_ne!(a, stack_hash(&trace(&[1, 2, 3]), 2));
        // Entries past `len` are ignored.
        assert_eq!(
            stack_hash(&trace(&[1, 2, 9]), 2),
            stack_hash(&trace(&[1, 2, 7]), 2)
        );
    }

    #[test]
    fn hash_spreads_similar_stacks() {
        // 100k stacks that differ only in the leaf (as samples in one hot
        // loop do): no two share a hash.
        let mut seen = std::collections::HashSet::new();
        for leaf in 0..100_000u64 {
            let ips = trace(&[0x5555_0000 + leaf, 0x5555_1234, 0x7fff_0000]);
            assert!(seen.insert(stack_hash(&ips, 3)));
        }
        assert!(!seen.contains(&NO_STACK));
    }

    #[test]
    fn frames_are_clamped() {
        let t = StackTrace {
            len: 500,
            flags: 0,
            ips: [7; MAX_STACK_DEPTH],
        };
        assert_eq!(t.frames().len(), MAX_STACK_DEPTH);
        let t = StackTrace {
            len: 2,
            flags: TRUNCATED,
            ips: trace(&[1, 2]),
        };
        assert_eq!(t.frames(), [1, 2]);
        assert!(t.truncated());
    }
}

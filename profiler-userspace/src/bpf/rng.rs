//! The random source of the sampling rule in userspace: the daemon applies
//! the rule itself to intervals still open at a window's end (`in_flight.rs`).
use profiler_common::off_cpu::xorshift_next;

/// xorshift64*: the random source of the sampling rule in userspace.
pub struct Rng(u64);

impl Rng {
    /// Seeded from the kernel's random pool.
    #[must_use]
    pub fn new() -> Self {
        let mut seed = [0u8; 8];
        // SAFETY: `seed` is a writable buffer of the length passed.
        unsafe { libc::getrandom(seed.as_mut_ptr().cast(), seed.len(), 0) };
        Self(u64::from_ne_bytes(seed) | 1)
    }

    pub(super) fn next_u32(&mut self) -> u32 {
        xorshift_next(&mut self.0)
    }
}

impl Default for Rng {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_roughly_uniform() {
        let mut rng = Rng(42);
        let below_half = (0..10_000)
            .filter(|_| rng.next_u32() < u32::MAX / 2)
            .count();
        assert!((4_700..5_300).contains(&below_half), "{below_half}");
    }
}

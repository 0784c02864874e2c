//! Which runtimes' maps hold a process ([`crate::maps::RUNTIME_PROCS`]):
//! a sample looks up a process in each runtime's map only when its bit is
//! set, so a process with none (most of a host) costs one lookup, not one
//! per runtime.

/// A set of runtimes, as [`crate::maps::RUNTIME_PROCS`] holds it.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Runtimes(pub u8);

impl Runtimes {
    /// No runtime: a process not in the map.
    pub const NONE: Self = Self(0);
    /// In `PYTHON_PROCS`.
    pub const PYTHON: Self = Self(1);
    /// In `JAVA_PROCS`.
    pub const JAVA: Self = Self(2);
    /// In `GO_PROCS`.
    pub const GO: Self = Self(4);
    /// In `THREAD_CTX_PROCS`.
    pub const THREAD_CTX: Self = Self(8);

    /// Whether `runtime`'s bits are all in the set.
    #[must_use]
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    pub const fn has(self, runtime: Self) -> bool {
        self.0 & runtime.0 == runtime.0 && runtime.0 != 0
    }

    /// The set with `runtime` added.
    #[must_use]
    pub const fn with(self, runtime: Self) -> Self {
        Self(self.0 | runtime.0)
    }

    /// The set with `runtime` taken out.
    #[must_use]
    pub const fn without(self, runtime: Self) -> Self {
        Self(self.0 & !runtime.0)
    }

    /// Whether the set is empty.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

#[cfg(feature = "user")]
// SAFETY: repr(transparent) over a u8: one byte, every bit pattern valid.
unsafe impl aya::Pod for Runtimes {}

#[cfg(test)]
mod tests {
    use super::Runtimes;

    #[test]
    fn a_runtime_is_in_the_set_from_its_addition_to_its_removal() {
        let set = Runtimes::NONE.with(Runtimes::GO).with(Runtimes::THREAD_CTX);
        assert!(set.has(Runtimes::GO) && set.has(Runtimes::THREAD_CTX));
        assert!(!set.has(Runtimes::PYTHON) && !set.has(Runtimes::JAVA));
        assert!(!set.has(Runtimes::NONE));
        let set = set.without(Runtimes::GO);
        assert!(!set.has(Runtimes::GO) && set.has(Runtimes::THREAD_CTX));
        assert!(set.without(Runtimes::THREAD_CTX).is_empty());
    }
}

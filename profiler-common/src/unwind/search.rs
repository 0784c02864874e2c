//! The binary search the unwinder runs over a process's mappings and a
//! binary's rows, in the kernel and in the tests alike: one probe at a
//! time ([`probe`], [`narrow`], [`found`]), its open range kept wherever
//! the caller keeps it ([`SearchRange`]).

/// One probe of a binary search for the last entry whose pc is `<= pc`
/// over `[lo, hi)`: the entry to read next ([`search`] runs the probes).
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
#[must_use]
pub const fn probe(lo: u32, hi: u32) -> u32 {
    lo + (hi - lo) / 2
}

/// Narrows `[lo, hi)` after reading entry `mid`'s pc.
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
#[must_use]
pub const fn narrow(lo: u32, hi: u32, mid: u32, mid_pc: u64, pc: u64) -> (u32, u32) {
    if mid_pc <= pc {
        (mid + 1, hi)
    } else {
        (lo, mid)
    }
}

/// The result of a finished search (`lo == hi`): the entry index, if any
/// entry's pc is `<= pc` (entries before the search's first `lo` are).
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
#[must_use]
pub const fn found(lo: u32) -> Option<u32> {
    lo.checked_sub(1)
}

/// Where a search keeps its open range `[lo, hi)` between probes: a local
/// pair, or the kernel walk's `WalkState`.
pub trait SearchRange {
    fn get(&mut self) -> (u32, u32);
    fn set(&mut self, range: (u32, u32));
}

impl SearchRange for (u32, u32) {
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    fn get(&mut self) -> (u32, u32) {
        *self
    }

    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    fn set(&mut self, range: (u32, u32)) {
        *self = range;
    }
}

/// Index of the last entry in `lo..hi` whose pc is `<= pc` (`lo - 1` when
/// none is but `lo` is not 0: the caller knows the entries before `lo` are),
/// with at most `steps` probes; `pc_at(i)` reads entry `i`'s pc and may
/// fail (`None`), which ends the search with `None`.
pub fn search(
    range: (u32, u32),
    pc: u64,
    steps: u32,
    pc_at: impl FnMut(u32) -> Option<u64>,
) -> Option<u32> {
    search_in(&mut (0, 0), range, pc, steps, pc_at)
}

/// [`search`] with its range kept in `state` between probes: the kernel's
/// walk runs this with its `WalkState` (`profiler-ebpf/src/unwind.rs`).
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub fn search_in(
    state: &mut impl SearchRange,
    range: (u32, u32),
    pc: u64,
    steps: u32,
    mut pc_at: impl FnMut(u32) -> Option<u64>,
) -> Option<u32> {
    state.set(range);
    for _ in 0..steps {
        let (lo, hi) = state.get();
        if lo >= hi {
            break;
        }
        let mid = probe(lo, hi);
        state.set(narrow(lo, hi, mid, pc_at(mid)?, pc));
    }
    let (lo, hi) = state.get();
    if lo < hi { None } else { found(lo) }
}

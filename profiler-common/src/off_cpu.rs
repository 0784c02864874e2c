//! The off-CPU sampling rule, shared by the eBPF program (which applies it
//! to every off-CPU interval) and the daemon (which applies it to intervals
//! still open when a window closes).
//!
//! For an interval of duration `d` and rate `r`:
//! - `r == 0` or `d >= r`: keep; time += `d`, count += 1.
//! - `d < r`: keep with probability `d / r`; time += `r`, count += `r / d`.
//!
//! Expected time is `d/r * r = d` and expected count is `d/r * r/d = 1`, so
//! the totals are unbiased whatever the mix of short and long intervals
//! (threshold sampling; Duffield, Lund and Thorup 2005; Go CL 299991). The
//! naive scheme, keeping with probability `d / r` but recording `d`, shrinks
//! short intervals by `d / r`: it is kept only to demonstrate that bias.
//!
//! Counts are fractional (`r / d`), and kernel maps hold integers, so counts
//! are fixed point: [`COUNT_SCALE`] units per event. The truncation of
//! `r * COUNT_SCALE / d` loses less than one unit per kept event (< 0.1%).

/// Fixed-point scale of off-CPU event counts (1 event = 1000 units).
pub const COUNT_SCALE: u64 = 1000;

/// Largest rate the rule accepts: `rand * r` must fit in a `u64`.
pub const MAX_RATE_NS: u64 = u32::MAX as u64;

/// What one kept interval adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weight {
    /// Off-CPU nanoseconds.
    pub time_ns: u64,
    /// Events, in [`COUNT_SCALE`] units.
    pub count: u64,
}

/// Applies the rule to an interval of `d_ns` with rate `rate_ns` (at most
/// [`MAX_RATE_NS`]), given a uniformly random `rand`. Returns `None` when
/// the interval is not kept.
#[must_use]
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub fn sample(d_ns: u64, rate_ns: u64, rand: u32) -> Option<Weight> {
    if rate_ns == 0 || d_ns >= rate_ns {
        return Some(Weight {
            time_ns: d_ns,
            count: COUNT_SCALE,
        });
    }
    if !short_interval_kept(d_ns, rate_ns, rand) {
        return None;
    }
    Some(Weight {
        time_ns: rate_ns,
        count: rate_ns * COUNT_SCALE / d_ns,
    })
}

/// The biased scheme: keep with probability `d / r`, record `d` and 1.
#[must_use]
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub fn sample_naive(d_ns: u64, rate_ns: u64, rand: u32) -> Option<Weight> {
    if rate_ns == 0 || d_ns >= rate_ns || short_interval_kept(d_ns, rate_ns, rand) {
        Some(Weight {
            time_ns: d_ns,
            count: COUNT_SCALE,
        })
    } else {
        None
    }
}

/// The rule with its random draw taken ahead, when the interval begins:
/// the interval will be kept if it lasts longer than this threshold,
/// `rand / 2³² * r` rounded down. Less than `rate_ns` (at most
/// [`MAX_RATE_NS`], so it fits a `u32`), so an interval of `r` or longer
/// is always kept; `d > threshold` holds exactly when [`sample`] with the
/// same `rand` keeps `d`, so the probability is still `d / r`.
#[must_use]
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub fn threshold(rate_ns: u64, rand: u32) -> u32 {
    #[allow(clippy::cast_possible_truncation, reason = "below rate_ns <= u32::MAX")]
    let threshold = ((u64::from(rand) * rate_ns) >> 32) as u32;
    threshold
}

/// The weight of `part_ns`, one part of a kept interval of `d_ns` (a part
/// is its time blocked or its time waiting for a CPU): the rule is applied
/// to the whole interval once ([`threshold`]), and a kept interval shares
/// its weight between its parts in proportion. An interval shorter than
/// the rate is kept with probability `d / r`, so each part's time is
/// scaled by `r / d` and counts `r / d` events: the expected time of a
/// part is its own, and each part is one event on average. Parts of `r`
/// or longer intervals are recorded as they are. `naive`: the biased
/// scheme, the raw length and one event. `None` for an empty part.
#[must_use]
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub fn weigh_part(part_ns: u64, d_ns: u64, rate_ns: u64, naive: bool) -> Option<Weight> {
    if part_ns == 0 {
        return None;
    }
    if naive || rate_ns == 0 || d_ns >= rate_ns {
        return Some(Weight {
            time_ns: part_ns,
            count: COUNT_SCALE,
        });
    }
    // part <= d < r <= u32::MAX: the products fit a u64. The max changes
    // nothing for a part of d, and shows the compiler that d is not 0 (an
    // eBPF program cannot have the panic of a division by zero).
    let d_ns = d_ns.max(part_ns);
    Some(Weight {
        time_ns: part_ns * rate_ns / d_ns,
        count: rate_ns * COUNT_SCALE / d_ns,
    })
}

/// Splits the off-CPU interval `[start, end]` into (blocked until woken,
/// waiting for a CPU). `preempted`: the thread left the CPU runnable, so it
/// waited for a CPU all along. Otherwise `queued_ns` is the run-queue wait
/// that ends at `end` (the scheduler's own figure, see [`crate::sched`]; 0
/// when unknown): a wait longer than the interval (it began before `start`,
/// the part before which was already accounted) leaves only CPU waiting.
#[must_use]
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub fn split_interval(preempted: bool, start: u64, end: u64, queued_ns: u64) -> (u64, u64) {
    let total = end - start;
    if preempted || queued_ns >= total {
        (0, total)
    } else {
        (total - queued_ns, queued_ns)
    }
}

/// One step of xorshift64* (Vigna): the next 32 random bits from `state`,
/// which must not be 0. The sampling rule's random source on both sides:
/// a per-CPU state in the kernel (no helper call on the switch path), one
/// per window loop in the daemon.
#[must_use]
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub fn xorshift_next(state: &mut u64) -> u32 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    #[allow(clippy::cast_possible_truncation, reason = "the high half")]
    let bits = (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32;
    bits
}

/// `rand / 2³² < d / r`, exactly, in integers (`d < r <= u32::MAX`).
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
fn short_interval_kept(d_ns: u64, rate_ns: u64, rand: u32) -> bool {
    u64::from(rand) * rate_ns < d_ns << 32
}

#[cfg(test)]
mod tests;

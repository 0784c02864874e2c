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
    if !kept(d_ns, rate_ns, rand) {
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
    if rate_ns == 0 || d_ns >= rate_ns || kept(d_ns, rate_ns, rand) {
        Some(Weight {
            time_ns: d_ns,
            count: COUNT_SCALE,
        })
    } else {
        None
    }
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
fn kept(d_ns: u64, rate_ns: u64, rand: u32) -> bool {
    u64::from(rand) * rate_ns < d_ns << 32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic, as the kernel's per-CPU source is per seed.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u32 {
            xorshift_next(&mut self.0)
        }
    }

    #[test]
    fn long_intervals_and_rate_zero_keep_everything() {
        assert_eq!(
            sample(5_000, 1_000, u32::MAX),
            Some(Weight {
                time_ns: 5_000,
                count: 1000
            })
        );
        assert_eq!(
            sample(1_000, 1_000, u32::MAX),
            Some(Weight {
                time_ns: 1_000,
                count: 1000
            })
        );
        assert_eq!(
            sample(7, 0, u32::MAX),
            Some(Weight {
                time_ns: 7,
                count: 1000
            })
        );
    }

    #[test]
    fn short_intervals_are_reweighted_when_kept() {
        // d/r = 1/4: rand below 2³²/4 keeps.
        assert_eq!(
            sample(250, 1_000, 0),
            Some(Weight {
                time_ns: 1_000,
                count: 4000
            })
        );
        assert_eq!(
            sample(250, 1_000, (1 << 30) - 1),
            Some(Weight {
                time_ns: 1_000,
                count: 4000
            })
        );
        assert_eq!(sample(250, 1_000, 1 << 30), None);
        assert_eq!(
            sample(0, 1_000, 0),
            None,
            "zero-length intervals carry no weight"
        );
        assert_eq!(
            sample(1, MAX_RATE_NS, 0).map(|w| w.time_ns),
            Some(MAX_RATE_NS)
        );
    }

    #[test]
    fn intervals_split_at_the_wakeup() {
        assert_eq!(
            split_interval(true, 100, 200, 30),
            (0, 100),
            "preempted: all waiting"
        );
        assert_eq!(split_interval(false, 100, 200, 0), (100, 0), "never queued");
        assert_eq!(split_interval(false, 100, 200, 20), (80, 20));
        assert_eq!(
            split_interval(false, 100, 200, 150),
            (0, 100),
            "queued since before start"
        );
    }

    /// Totals over many intervals of three lengths, as a fraction of truth.
    fn totals(rule: fn(u64, u64, u32) -> Option<Weight>, rate: u64) -> [(f64, f64); 3] {
        // Equal true time in each class: 100 µs × 20000, 1 ms × 2000, 20 ms × 100.
        let classes = [
            (100_000u64, 20_000u64),
            (1_000_000, 2_000),
            (20_000_000, 100),
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        classes.map(|(d, n)| {
            let (mut time, mut count) = (0u64, 0u64);
            for _ in 0..n {
                if let Some(w) = rule(d, rate, rng.next()) {
                    time += w.time_ns;
                    count += w.count;
                }
            }
            #[expect(clippy::cast_precision_loss, reason = "ratios")]
            (
                time as f64 / (d * n) as f64,
                count as f64 / (n * COUNT_SCALE) as f64,
            )
        })
    }

    #[test]
    fn debiased_totals_are_unbiased_for_a_mix_of_lengths() {
        // Rate 10 ms: the 100 µs class is kept 1% of the time (~200 of
        // 20000), so its relative standard error is ~7%; ±20% is ~3 sigma.
        for (class, (time, count)) in totals(sample, 10_000_000).into_iter().enumerate() {
            assert!(
                (time - 1.0).abs() < 0.2,
                "class {class}: time {time:.3} of truth"
            );
            assert!(
                (count - 1.0).abs() < 0.2,
                "class {class}: count {count:.3} of truth"
            );
        }
    }

    #[test]
    fn naive_weighting_is_off_by_far_more_than_2x() {
        // The same data with the naive rule: the 100 µs class keeps ~1% of
        // its time and the 1 ms class ~10%, while 20 ms stays exact. This
        // is the bias the debiased rule removes; a test that accepted these
        // numbers would not be testing anything.
        let [short, medium, long] = totals(sample_naive, 10_000_000);
        assert!(short.0 < 0.5, "100 µs class: {:.3} of truth", short.0);
        assert!(medium.0 < 0.5, "1 ms class: {:.3} of truth", medium.0);
        assert!((long.0 - 1.0).abs() < 1e-9);
    }
}

//! Tests of the sampling rule (`off_cpu.rs`).
use std::format;

use super::*;

/// Interval lengths and how many of each, with equal true time in each
/// class: 100 µs × 20000, 1 ms × 2000, 20 ms × 100.
const CLASSES: [(u64, u64); 3] = [(100_000, 20_000), (1_000_000, 2_000), (20_000_000, 100)];

/// Deterministic, as the kernel's per-CPU source is per seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u32 {
        xorshift_next(&mut self.0)
    }
}

/// Time and count totals, as fractions of truth, within ±20% (about 3
/// sigma for the rarest class kept; see the tests that call this).
fn assert_near_truth((time, count): (f64, f64), what: &str) {
    assert!((time - 1.0).abs() < 0.2, "{what}: time {time:.3} of truth");
    assert!(
        (count - 1.0).abs() < 0.2,
        "{what}: count {count:.3} of truth"
    );
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
fn a_threshold_drawn_ahead_keeps_exactly_what_sample_keeps() {
    // The same decision for every draw: a sweep of rand (its extremes
    // and a stride through the range) against lengths around the rate.
    let rate = 1_000_000;
    let draws = (0..=u32::MAX)
        .step_by(65_537)
        .chain([u32::MAX - 1, u32::MAX]);
    for rand in draws {
        let t = threshold(rate, rand);
        assert!(u64::from(t) < rate, "threshold {t} not below the rate");
        for d in [0, 1, 999, 250_000, 999_999, 1_000_000, 5_000_000] {
            assert_eq!(
                u64::from(t) < d,
                sample(d, rate, rand).is_some(),
                "d {d} rand {rand}"
            );
        }
    }
    assert_eq!(
        threshold(0, u32::MAX),
        0,
        "rate 0 keeps every non-empty interval"
    );
    assert_eq!(threshold(MAX_RATE_NS, u32::MAX), u32::MAX - 1);
}

#[test]
fn parts_of_a_kept_interval_share_its_weight() {
    // 300 ns blocked and 100 ns queued, kept at rate 1000 (d/r = 0.4):
    // each part scaled by r/d = 2.5, each 2.5 events.
    assert_eq!(
        weigh_part(300, 400, 1_000, false),
        Some(Weight {
            time_ns: 750,
            count: 2500
        })
    );
    assert_eq!(
        weigh_part(100, 400, 1_000, false),
        Some(Weight {
            time_ns: 250,
            count: 2500
        })
    );
    assert_eq!(weigh_part(0, 400, 1_000, false), None, "an empty part");
    assert_eq!(
        weigh_part(300, 4_000, 1_000, false),
        Some(Weight {
            time_ns: 300,
            count: 1000
        }),
        "an interval as long as the rate is recorded as it is"
    );
    assert_eq!(
        weigh_part(300, 400, 1_000, true),
        Some(Weight {
            time_ns: 300,
            count: 1000
        }),
        "naive"
    );
}

/// Totals per part over many intervals split 3:1 into blocked and
/// queued, kept by a threshold drawn ahead, as fractions of truth.
fn part_totals(rate: u64, naive: bool) -> [[(f64, f64); 2]; 3] {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    CLASSES.map(|(d, n)| {
        let parts = [d * 3 / 4, d / 4];
        let mut sums = [(0u64, 0u64); 2];
        for _ in 0..n {
            if d <= u64::from(threshold(rate, rng.next())) {
                continue;
            }
            for (sum, part) in sums.iter_mut().zip(parts) {
                let w = weigh_part(part, d, rate, naive).expect("non-empty");
                sum.0 += w.time_ns;
                sum.1 += w.count;
            }
        }
        #[expect(clippy::cast_precision_loss, reason = "ratios")]
        [0, 1].map(|i| {
            (
                sums[i].0 as f64 / (parts[i] * n) as f64,
                sums[i].1 as f64 / (n * COUNT_SCALE) as f64,
            )
        })
    })
}

#[test]
fn each_part_is_unbiased_when_the_whole_interval_is_sampled() {
    // As above: the 100 µs class keeps ~200 of 20000 at 10 ms, ~7%
    // relative standard error, so ±20% is ~3 sigma. Both parts of an
    // interval are kept together, so each part's error is the
    // interval's. Naive weights keep ~1% and ~10% of the two short
    // classes' time: far outside.
    for (class, parts) in part_totals(10_000_000, false).into_iter().enumerate() {
        for (part, totals) in parts.into_iter().enumerate() {
            assert_near_truth(totals, &format!("class {class} part {part}"));
        }
    }
    let [short, medium, long] = part_totals(10_000_000, true);
    assert!(
        short[0].0 < 0.5 && short[1].0 < 0.5,
        "naive 100 µs: {short:?}"
    );
    assert!(
        medium[0].0 < 0.5 && medium[1].0 < 0.5,
        "naive 1 ms: {medium:?}"
    );
    assert!((long[0].0 - 1.0).abs() < 1e-9 && (long[1].0 - 1.0).abs() < 1e-9);
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
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    CLASSES.map(|(d, n)| {
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
    for (class, totals) in totals(sample, 10_000_000).into_iter().enumerate() {
        assert_near_truth(totals, &format!("class {class}"));
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

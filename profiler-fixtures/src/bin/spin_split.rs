//! One thread that spends 3/4 of its CPU time in `spin_heavy` and 1/4 in
//! `spin_light`, for the given number of seconds. Slices are random
//! (heavy 1.5–4.5 ms, light 0.5–1.5 ms): a fixed 4 ms cycle would alias
//! with a fixed sampling period and let a sampler see only a few phases.
//!
//! Protocol (see `run_protocol`): `ready pid=P tid=T`, then after "go" the
//! CPU time it measured in each function: `heavy_ns=H light_ns=L`.
use std::time::Instant;

use profiler_fixtures::{burn, gettid, run_protocol, run_time_from_args};

// The two bodies differ (the added constant) so that LLVM's function
// merging cannot fold them into one symbol.
#[inline(never)]
fn spin_heavy(ns: u64) -> u64 {
    std::hint::black_box(burn(ns)).wrapping_add(1) - 1
}

#[inline(never)]
fn spin_light(ns: u64) -> u64 {
    std::hint::black_box(burn(ns)).wrapping_add(2) - 2
}

fn main() {
    let run_time = run_time_from_args();
    run_protocol(&format!("tid={}", gettid()), || {
        let (mut heavy_ns, mut light_ns) = (0, 0);
        let mut rng: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id());
        let mut uniform = |low: u64, high: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            low + rng % (high - low)
        };
        let start = Instant::now();
        while start.elapsed() < run_time {
            heavy_ns += spin_heavy(uniform(1_500_000, 4_500_000));
            light_ns += spin_light(uniform(500_000, 1_500_000));
        }
        format!("heavy_ns={heavy_ns} light_ns={light_ns}")
    });
}

//! A CPU-bound workload: one thread pinned to CPU 0 (or to `PIN_CPU`, for
//! one copy per CPU) runs a fixed loop for the given number of seconds and
//! reports its rate.
//!
//! Protocol (see `run_protocol`): `ready pid=P`, then after "go"
//! `loops_per_sec=N`.
use std::time::Instant;

use profiler_fixtures::{pin_to_cpu, run_protocol, run_time_from_args};

#[inline(never)]
fn work() -> u64 {
    let mut x: u64 = 1;
    for _ in 0..100_000 {
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
    }
    x
}

fn main() {
    let run_time = run_time_from_args();
    run_protocol("", || {
        pin_to_cpu(
            std::env::var("PIN_CPU").map_or(0, |cpu| cpu.parse().expect("PIN_CPU: a CPU number")),
        );
        let start = Instant::now();
        let mut loops: u64 = 0;
        while start.elapsed() < run_time {
            std::hint::black_box(work());
            loops += 1;
        }
        #[expect(clippy::cast_precision_loss, reason = "a rate")]
        let rate = loops as f64 / start.elapsed().as_secs_f64();
        format!("loops_per_sec={rate:.0}")
    });
}

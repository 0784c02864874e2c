//! One thread that spends 3/4 of its CPU time in `spin_heavy` and 1/4 in
//! `spin_light`, in 3 ms and 1 ms slices, for the given number of seconds.
//!
//! Protocol (see `run_protocol`): `ready pid=P tid=T`, then after "go" the
//! CPU time it measured in each function: `heavy_ns=H light_ns=L`.
use std::time::Instant;

use profiler_fixtures::{burn, gettid, run_protocol, run_time_from_args};

#[inline(never)]
fn spin_heavy() -> u64 {
    burn(3_000_000)
}

#[inline(never)]
fn spin_light() -> u64 {
    burn(1_000_000)
}

fn main() {
    let run_time = run_time_from_args();
    run_protocol(&format!("tid={}", gettid()), || {
        let (mut heavy_ns, mut light_ns) = (0, 0);
        let start = Instant::now();
        while start.elapsed() < run_time {
            heavy_ns += spin_heavy();
            light_ns += spin_light();
        }
        format!("heavy_ns={heavy_ns} light_ns={light_ns}")
    });
}

//! One thread alternating 20 ms of spinning (`spin_span`) with 30 ms of
//! sleeping (`sleep_span`), for the given number of seconds.
//!
//! Protocol (see `run_protocol`): `ready pid=P tid=T`, then after "go"
//! `spin_ns=N sleep_ns=N`: CPU time spent spinning, time off the CPU asleep.
use std::time::{Duration, Instant};

use profiler_fixtures::{
    burn, gettid, run_protocol, run_time_from_args, tight_timer_slack, timed_sleep,
};

#[inline(never)]
fn spin_span() -> u64 {
    std::hint::black_box(burn(20_000_000))
}

#[inline(never)]
fn sleep_span() -> u64 {
    // black_box: no tail call, so this function keeps its own frame.
    std::hint::black_box(timed_sleep(Duration::from_millis(30)))
}

fn main() {
    tight_timer_slack();
    let run_time = run_time_from_args();
    run_protocol(&format!("tid={}", gettid()), || {
        let until = Instant::now() + run_time;
        let (mut spin_ns, mut sleep_ns) = (0, 0);
        while Instant::now() < until {
            spin_ns += spin_span();
            sleep_ns += sleep_span();
        }
        format!("spin_ns={spin_ns} sleep_ns={sleep_ns}")
    });
}

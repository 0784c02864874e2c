//! Three threads blocked almost all the time, each in its own function and
//! with very different block lengths: `block_short` (100 µs sleeps),
//! `block_medium` (1 ms) and `block_long` (20 ms), for the given number of
//! seconds. Each measures the time it spent off the CPU in its sleeps.
//!
//! Protocol (see `run_protocol`): `ready pid=P short=T medium=T long=T`
//! (thread ids), then after "go" `short_ns=N medium_ns=N long_ns=N`.
use std::time::{Duration, Instant};

use profiler_fixtures::{
    Workers, run_protocol, run_time_from_args, tight_timer_slack, timed_sleep,
};

fn block_for(until: Instant, each: Duration) -> u64 {
    tight_timer_slack();
    let mut blocked = 0;
    while Instant::now() < until {
        blocked += timed_sleep(each);
    }
    blocked
}

#[inline(never)]
fn block_short(until: Instant) -> u64 {
    // black_box: no tail call, so this function keeps its own frame.
    std::hint::black_box(block_for(until, Duration::from_micros(100)))
}

#[inline(never)]
fn block_medium(until: Instant) -> u64 {
    std::hint::black_box(block_for(until, Duration::from_millis(1)))
}

#[inline(never)]
fn block_long(until: Instant) -> u64 {
    std::hint::black_box(block_for(until, Duration::from_millis(20)))
}

fn main() {
    let run_time = run_time_from_args();
    let workers = Workers::spawn(vec![
        ("short", block_short as fn(Instant) -> u64),
        ("medium", block_medium),
        ("long", block_long),
    ]);
    run_protocol(&workers.ids.clone(), || {
        workers
            .run(run_time)
            .into_iter()
            .map(|(name, blocked)| format!("{name}_ns={blocked}"))
            .collect::<Vec<_>>()
            .join(" ")
    });
}

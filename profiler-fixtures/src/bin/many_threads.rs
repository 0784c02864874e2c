//! A busy service shape: 200 threads, each spinning 100 µs then sleeping
//! 20 ms, in a few distinct functions, for the given number of seconds
//! (about one CPU of load in all).
//!
//! Protocol (see `run_protocol`): `ready pid=P`, then after "go" `done`.
use std::time::{Duration, Instant};

use profiler_fixtures::{Work, Workers, burn, run_protocol, run_time_from_args, timed_sleep};

fn serve(until: Instant) {
    while Instant::now() < until {
        std::hint::black_box(burn(100_000));
        std::hint::black_box(timed_sleep(Duration::from_millis(20)));
    }
}

#[inline(never)]
fn handler_a(until: Instant) {
    serve(until);
}

#[inline(never)]
fn handler_b(until: Instant) {
    serve(until);
}

fn main() {
    let run_time = run_time_from_args();
    let workers: Vec<(&'static str, Work<()>)> = (0..200)
        .map(|i| {
            (
                "worker",
                if i % 2 == 0 {
                    handler_a as Work<()>
                } else {
                    handler_b
                },
            )
        })
        .collect();
    let workers = Workers::spawn(workers);
    run_protocol("", || {
        let _ = workers.run(run_time);
        "done".to_owned()
    });
}

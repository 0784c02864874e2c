//! Threads in known scheduler states, for the given number of seconds:
//! `sleeper` sleeps in 10 ms naps (sleeping); `victim` and `hog` both spin
//! pinned to CPU 0, so each spends about half its time preempted by the
//! other, runnable but waiting for the CPU (runqueue).
//!
//! Protocol (see `run_protocol`): `ready pid=P sleeper=T victim=T hog=T`
//! (thread ids), then after "go" `done`.
use std::time::{Duration, Instant};

use profiler_fixtures::{Workers, burn, pin_to_cpu, run_protocol, run_time_from_args, timed_sleep};

#[inline(never)]
fn nap(until: Instant) {
    while Instant::now() < until {
        let _ = timed_sleep(Duration::from_millis(10));
    }
}

#[inline(never)]
fn contend(until: Instant) {
    pin_to_cpu(0);
    while Instant::now() < until {
        let _ = burn(1_000_000);
    }
}

fn main() {
    let run_time = run_time_from_args();
    let workers = Workers::spawn(vec![
        ("sleeper", nap as fn(Instant)),
        ("victim", contend),
        ("hog", contend),
    ]);
    run_protocol(&workers.ids.clone(), || {
        let _ = workers.run(run_time);
        "done".to_owned()
    });
}

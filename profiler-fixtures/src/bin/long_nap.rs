//! One worker thread that sleeps in a single call to `long_nap` for the
//! given number of seconds (off the CPU across several profile windows),
//! then exits. The main thread lingers in the protocol, so the worker's
//! tid holds nothing but the nap.
//!
//! Protocol (see `run_protocol`): `ready pid=P napper=T`, then after "go"
//! `nap_ns=N`, the time the worker spent off the CPU in the call.
use std::time::Instant;

use profiler_fixtures::{Workers, run_protocol, run_time_from_args, timed_sleep};

#[inline(never)]
fn long_nap(until: Instant) -> u64 {
    // black_box: no tail call, so this function keeps its own frame.
    std::hint::black_box(timed_sleep(until.saturating_duration_since(Instant::now())))
}

fn main() {
    let run_time = run_time_from_args();
    let workers = Workers::spawn(vec![("napper", long_nap as fn(Instant) -> u64)]);
    let ids = workers.ids.clone();
    run_protocol(&ids, || {
        let naps = workers.run(run_time);
        format!("nap_ns={}", naps[0].1)
    });
}

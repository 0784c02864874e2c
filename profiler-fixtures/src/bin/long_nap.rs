//! One thread that sleeps in a single call to `long_nap` for the given
//! number of seconds: off the CPU across several profile windows.
//!
//! Protocol (see `run_protocol`): `ready pid=P tid=T`, then after "go"
//! `nap_ns=N`, the time it spent off the CPU in the call.
use profiler_fixtures::{gettid, run_protocol, run_time_from_args, timed_sleep};

#[inline(never)]
fn long_nap(d: std::time::Duration) -> u64 {
    // black_box: no tail call, so this function keeps its own frame.
    std::hint::black_box(timed_sleep(d))
}

fn main() {
    let run_time = run_time_from_args();
    run_protocol(&format!("tid={}", gettid()), || {
        format!("nap_ns={}", long_nap(run_time))
    });
}

//! A system-call-heavy workload: one thread calls getppid(2) in a loop
//! (like `perf bench syscall basic`) for the given number of seconds. A
//! hook on every system call's exit slows it; hooks per context switch do
//! not, since it hardly ever switches.
//!
//! Protocol (see `run_protocol`): `ready pid=P`, then after "go"
//! `calls_per_sec=N`.
use std::time::Instant;

use profiler_fixtures::{run_protocol, run_time_from_args};

fn main() {
    let run_time = run_time_from_args();
    run_protocol("", || {
        let start = Instant::now();
        let mut calls: u64 = 0;
        while start.elapsed() < run_time {
            for _ in 0..10_000 {
                // SAFETY: getppid has no preconditions. Through libc, not
                // a vDSO: it is a real system call every time.
                std::hint::black_box(unsafe { libc::getppid() });
            }
            calls += 10_000;
        }
        #[expect(clippy::cast_precision_loss, reason = "a rate")]
        let rate = calls as f64 / start.elapsed().as_secs_f64();
        format!("calls_per_sec={rate:.0}")
    });
}

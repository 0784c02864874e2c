//! A fork/exec storm: runs `/bin/true` (a fork, an exec, the loader's
//! mmaps and an exit: a process that lives about a millisecond) one after
//! another for the given seconds, at most RATE a second (the second
//! argument; without it, as fast as it can). What every build, shell
//! pipeline and cron job does, at a thousand times the rate.
//!
//! Protocol (see `run_protocol`): `ready pid=P`, then after "go"
//! `execs_per_sec=N`.
use std::{
    process::Command,
    time::{Duration, Instant},
};

use profiler_fixtures::{run_protocol, run_time_from_args};

fn main() {
    let run_time = run_time_from_args();
    let rate: f64 = std::env::args()
        .nth(2)
        .map_or(Ok(0.0), |s| s.parse())
        .expect("usage: exec_loop [SECONDS [RATE]]");
    run_protocol("", || {
        let start = Instant::now();
        let mut execs: u32 = 0;
        while start.elapsed() < run_time {
            let status = Command::new("/bin/true").status().expect("run /bin/true");
            assert!(status.success(), "/bin/true: {status}");
            execs += 1;
            if rate > 0.0 {
                let due = start + Duration::from_secs_f64(f64::from(execs) / rate);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
        }
        let rate = f64::from(execs) / start.elapsed().as_secs_f64();
        format!("execs_per_sec={rate:.0}")
    });
}

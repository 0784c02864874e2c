//! A context-switch-heavy workload: two threads pinned to CPU 0 pass a
//! byte back and forth through two pipes (like `perf bench sched pipe -T`),
//! for the given number of seconds. Every round trip is two context
//! switches.
//!
//! Protocol (see `run_protocol`): `ready pid=P`, then after "go"
//! `round_trips_per_sec=N`.
use std::{
    fs::File,
    io::{Read as _, Write as _},
    os::fd::FromRawFd as _,
    time::Instant,
};

use profiler_fixtures::{pin_to_cpu, run_protocol, run_time_from_args};

fn pipe() -> (File, File) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: both descriptors are fresh and owned by nobody else.
    unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
}

fn main() {
    let run_time = run_time_from_args();
    let (mut ping_rx, mut ping_tx) = pipe();
    let (mut pong_rx, mut pong_tx) = pipe();
    let echo = std::thread::spawn(move || {
        pin_to_cpu(0);
        let mut byte = [0u8];
        while ping_rx.read_exact(&mut byte).is_ok() && byte[0] != 0 {
            pong_tx.write_all(&byte).expect("pong");
        }
    });
    run_protocol("", || {
        pin_to_cpu(0);
        let start = Instant::now();
        let mut trips: u64 = 0;
        let mut byte = [1u8];
        while start.elapsed() < run_time {
            for _ in 0..1000 {
                ping_tx.write_all(&[1]).expect("ping");
                pong_rx.read_exact(&mut byte).expect("pong");
            }
            trips += 1000;
        }
        ping_tx.write_all(&[0]).expect("stop");
        #[expect(clippy::cast_precision_loss, reason = "a rate")]
        let rate = trips as f64 / start.elapsed().as_secs_f64();
        format!("round_trips_per_sec={rate:.0}")
    });
    echo.join().expect("echo thread");
}

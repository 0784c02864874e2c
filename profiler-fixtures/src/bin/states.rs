//! Threads in known scheduler states, for the given number of seconds:
//! - `sleeper` sleeps in 10 ms naps (sleeping);
//! - `victim` and `hog` both spin pinned to CPU 0, so each spends about
//!   half its time preempted by the other, runnable but waiting for the
//!   CPU (runqueue);
//! - `dozer`, pinned to CPU 0 as well, sleeps in 2 ms naps: each time it
//!   is woken it waits (at nice 19) for the busy CPU before it runs, so its off-CPU
//!   time splits into sleeping and runqueue.
//!
//! Each thread measures its own truth: the time it spent off the CPU in
//! its naps (wall minus CPU time) and, from the kernel's
//! `/proc/thread-self/schedstat`, the time it spent waiting on a run queue.
//!
//! Protocol (see `run_protocol`): `ready pid=P sleeper=T victim=T hog=T
//! dozer=T` (thread ids), then after "go" `done NAME_off_ns=N
//! NAME_queued_ns=N ...` for every thread.
use std::{
    fmt::Write as _,
    time::{Duration, Instant},
};

use profiler_fixtures::{
    Workers, burn, pin_to_cpu, run_protocol, run_time_from_args, schedstat, timed_sleep,
};

/// What a thread measured of itself: (off-CPU ns in its naps, run-queue ns).
type Truth = (u64, u64);

#[inline(never)]
fn nap(until: Instant, each: Duration) -> u64 {
    let mut off = 0;
    while Instant::now() < until {
        off += timed_sleep(each);
    }
    off
}

fn sleeper(until: Instant) -> Truth {
    queued_during(|| nap(until, Duration::from_millis(10)))
}

fn dozer(until: Instant) -> Truth {
    pin_to_cpu(0);
    // At nice 19 a woken dozer does not preempt the spinners: it waits.
    // SAFETY: setpriority takes plain integers; `which` PRIO_PROCESS with
    // who 0 is the calling thread on Linux.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
    assert_eq!(rc, 0, "setpriority");
    queued_during(|| nap(until, Duration::from_millis(2)))
}

#[inline(never)]
fn contend(until: Instant) -> Truth {
    pin_to_cpu(0);
    queued_during(|| {
        while Instant::now() < until {
            let _ = burn(1_000_000);
        }
        0
    })
}

/// Runs `work` and returns its result with the run-queue time it cost.
fn queued_during(work: impl FnOnce() -> u64) -> Truth {
    let before = run_delay_ns();
    let off = work();
    (off, run_delay_ns() - before)
}

/// The calling thread's total run-queue wait.
fn run_delay_ns() -> u64 {
    schedstat("/proc/thread-self/schedstat").run_delay_ns
}

fn main() {
    let run_time = run_time_from_args();
    let workers = Workers::spawn(vec![
        ("sleeper", sleeper as fn(Instant) -> Truth),
        ("victim", contend),
        ("hog", contend),
        ("dozer", dozer),
    ]);
    run_protocol(&workers.ids.clone(), || {
        let mut line = "done".to_owned();
        for (name, (off, queued)) in workers.run(run_time) {
            let _ = write!(line, " {name}_off_ns={off} {name}_queued_ns={queued}");
        }
        line
    });
}

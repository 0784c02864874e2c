//! Shared helpers of the fixture programs. Fixtures are built as users
//! build Rust: optimised, without frame pointers; the measured functions
//! are `#[inline(never)]` only so that they exist as functions to measure.
//! [`client`] is the protocol's other end, for the tests and xtask;
//! [`http`], [`openmetrics`] and [`debuginfod`] serve the same readers.

pub mod backend;
pub mod client;
pub mod debuginfod;
pub mod distinct;
pub mod http;
pub mod openmetrics;

use std::time::Duration;

/// CPU time consumed by the calling thread, in nanoseconds.
///
/// # Panics
/// If the kernel refuses the thread CPU clock.
#[must_use]
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant
    // the kernel always supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// The calling thread's kernel thread id.
///
/// # Panics
/// Never in practice: thread ids are positive.
#[must_use]
pub fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    u32::try_from(tid).expect("tids are positive")
}

/// Burns CPU on the calling thread until it has used `budget_ns` more
/// nanoseconds of CPU time; returns the CPU time actually used. An
/// ordinary function of another crate: samples land in it (or in the vDSO's
/// clock below it), and its caller is found by unwinding.
#[must_use]
pub fn burn(budget_ns: u64) -> u64 {
    let start = thread_cpu_ns();
    let mut x: u64 = 1;
    loop {
        for _ in 0..20_000 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
        let used = thread_cpu_ns() - start;
        if used >= budget_ns {
            return used;
        }
    }
}

/// The fixture protocol, around the measured phase: print `ready ...`
/// (ids), wait for a line on stdin, run `measured`, print its result line,
/// then linger until stdin closes, so the process (and its mappings) stays
/// around until the test is done with it.
///
/// # Panics
/// If stdout or stdin fail.
pub fn run_protocol(ready: &str, measured: impl FnOnce() -> String) {
    use std::io::{BufRead as _, Read as _, Write as _};
    println!("ready pid={} {ready}", std::process::id());
    std::io::stdout().flush().expect("stdout");
    let mut stdin = std::io::stdin().lock();
    let mut go = String::new();
    stdin.read_line(&mut go).expect("stdin");
    let result = measured();
    println!("{result}");
    std::io::stdout().flush().expect("stdout");
    let mut rest = Vec::new();
    let _ = stdin.read_to_end(&mut rest);
}

/// A worker's measured phase: runs until the given instant.
pub type Work<T> = fn(std::time::Instant) -> T;

/// Named worker threads that report their tid, then wait for the measured
/// phase: each runs `work(until)` once `start` is called.
pub struct Workers<T> {
    starts: Vec<std::sync::mpsc::Sender<std::time::Instant>>,
    handles: Vec<(&'static str, std::thread::JoinHandle<T>)>,
    /// `name=tid` for each worker, for the ready line.
    pub ids: String,
}

impl<T: Send + 'static> Workers<T> {
    /// Spawns one thread per `(name, work)`.
    ///
    /// # Panics
    /// If a thread cannot be spawned.
    #[must_use]
    pub fn spawn(workers: Vec<(&'static str, Work<T>)>) -> Self {
        let mut ids = Vec::new();
        let mut starts = Vec::new();
        let mut handles = Vec::new();
        for (name, work) in workers {
            let (tid_tx, tid_rx) = std::sync::mpsc::channel();
            let (start_tx, start_rx) = std::sync::mpsc::channel::<std::time::Instant>();
            let handle = std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(move || {
                    tid_tx.send(gettid()).expect("spawner waits");
                    let until = start_rx.recv().expect("start");
                    work(until)
                })
                .expect("spawn");
            ids.push(format!("{name}={}", tid_rx.recv().expect("tid")));
            starts.push(start_tx);
            handles.push((name, handle));
        }
        Self {
            starts,
            handles,
            ids: ids.join(" "),
        }
    }

    /// Runs every worker until `run_time` from now; returns their results.
    ///
    /// # Panics
    /// If a worker panicked.
    #[must_use]
    pub fn run(self, run_time: Duration) -> Vec<(&'static str, T)> {
        let until = std::time::Instant::now() + run_time;
        for start in &self.starts {
            start.send(until).expect("worker waits");
        }
        self.handles
            .into_iter()
            .map(|(name, h)| (name, h.join().expect("worker")))
            .collect()
    }
}

/// Parses the first argument as a run time in seconds.
///
/// # Panics
/// With a usage message when the argument is not a number.
#[must_use]
pub fn run_time_from_args() -> Duration {
    let secs: f64 = std::env::args()
        .nth(1)
        .map_or(Ok(10.0), |s| s.parse())
        .expect("usage: FIXTURE [SECONDS]");
    Duration::from_secs_f64(secs)
}

/// Lowers the calling thread's timer slack to 1 ns, so a 100 µs sleep
/// sleeps ~100 µs rather than the default slack's extra 50 µs.
///
/// # Panics
/// If the kernel refuses.
pub fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    assert_eq!(rc, 0, "prctl(PR_SET_TIMERSLACK)");
}

/// Pins the calling thread to `cpu`.
///
/// # Panics
/// If the kernel refuses (e.g. the CPU is offline).
pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: an all-zero cpu_set_t is a valid empty set; CPU_SET and
    // sched_setaffinity get a pointer to it and its exact size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let rc = libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set);
        assert_eq!(rc, 0, "sched_setaffinity");
    }
}

/// Sleeps for `d` and returns how long the thread was off the CPU during
/// the call: its wall time minus the CPU time the thread used in it (the
/// system call's own work), which is what an off-CPU profiler measures.
/// The CPU clock is read inside the timed span, so the only on-CPU time
/// the difference misses is the few instructions around the two reads.
#[must_use]
pub fn timed_sleep(d: Duration) -> u64 {
    let start = std::time::Instant::now();
    let cpu = thread_cpu_ns();
    std::thread::sleep(d);
    let cpu = thread_cpu_ns() - cpu;
    let wall = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    wall.saturating_sub(cpu)
}

/// A thread's scheduler accounting from a `schedstat` file of `/proc`
/// (`/proc/thread-self/schedstat`, `/proc/PID/task/TID/schedstat`): the
/// kernel's own reference for time on a CPU and time waiting for one.
#[derive(Clone, Copy, Debug)]
pub struct Schedstat {
    /// Time on a CPU, in ns (the first field).
    pub on_cpu_ns: u64,
    /// Time waiting on a run queue, in ns (the second field).
    pub run_delay_ns: u64,
}

/// Reads the `schedstat` file at `path`.
///
/// # Panics
/// If the thread is gone or the file does not parse.
#[must_use]
pub fn schedstat(path: &str) -> Schedstat {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut fields = text.split_whitespace().map(str::parse::<u64>);
    let mut next = || {
        fields
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!("{path}: {text}"))
    };
    Schedstat {
        on_cpu_ns: next(),
        run_delay_ns: next(),
    }
}

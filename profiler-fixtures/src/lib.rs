//! Shared helpers of the fixture programs. Fixtures are built with frame
//! pointers (see `.cargo/config.toml`) and keep their measured functions
//! `#[inline(never)]`, so stacks and names are what the source says.

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
/// nanoseconds of CPU time; returns the CPU time actually used. Inlined
/// into its caller so the caller is the function samples land in.
#[expect(clippy::inline_always, reason = "the caller must be the leaf function")]
#[inline(always)]
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

//! The kernel's clocks, read in nanoseconds: the drain's monotonic clock
//! (`bpf_ktime_get_ns`'s) and a thread's CPU time (`cpu_time.rs`).

/// `clock` now, in nanoseconds.
#[must_use]
pub fn now_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &raw mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

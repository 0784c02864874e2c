//! The kernel's own accounting of a thread's CPU time: the reference the
//! tests compare on-CPU shares and sample counts with, where a fixture's
//! wall-clock measurements would include time it waited for a CPU.

/// Seconds thread `tid` of `pid` has spent on a CPU.
///
/// # Panics
/// If the thread is gone or its schedstat does not parse.
#[must_use]
#[expect(clippy::cast_precision_loss, reason = "ns, for seconds")]
pub fn on_cpu_seconds(pid: u32, tid: u32) -> f64 {
    let stat = profiler_fixtures::schedstat(&format!("/proc/{pid}/task/{tid}/schedstat"));
    stat.on_cpu_ns as f64 / 1e9
}

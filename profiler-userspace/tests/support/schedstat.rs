//! The kernel's own accounting of a thread's CPU time: the reference the
//! tests compare on-CPU shares and sample counts with, where a fixture's
//! wall-clock measurements would include time it waited for a CPU.
use std::fs;

/// Seconds thread `tid` of `pid` has spent on a CPU (the first field of
/// `/proc/PID/task/TID/schedstat`).
///
/// # Panics
/// If the thread is gone or the file does not parse.
#[must_use]
#[expect(clippy::cast_precision_loss, reason = "ns, for seconds")]
pub fn on_cpu_seconds(pid: u32, tid: u32) -> f64 {
    let path = format!("/proc/{pid}/task/{tid}/schedstat");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let ns: u64 = text
        .split_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("{path}: {text}"));
    ns as f64 / 1e9
}

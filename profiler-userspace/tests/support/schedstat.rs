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

/// A thread that never sleeps, read at one moment: wall time and the
/// kernel's accounting of it.
pub struct Spinner {
    path: String,
    at: std::time::Instant,
    stat: profiler_fixtures::Schedstat,
}

/// What a [`Spinner`] did between two reads, in seconds.
pub struct Spun {
    /// On a CPU, by the kernel's CPU clock of the thread.
    pub on_cpu: f64,
    /// Current on a CPU: the wall time it did not wait on a run queue.
    /// More than `on_cpu` by what the hypervisor stole from the vCPU
    /// meanwhile, which the thread's CPU clock leaves out while a
    /// sampling timer, on wall time, still finds the thread there.
    pub current: f64,
}

impl Spinner {
    /// Reads thread `tid` of `pid` now.
    ///
    /// # Panics
    /// If the thread is gone or its schedstat does not parse.
    #[must_use]
    pub fn read(pid: u32, tid: u32) -> Self {
        let path = format!("/proc/{pid}/task/{tid}/schedstat");
        let at = std::time::Instant::now();
        let stat = profiler_fixtures::schedstat(&path);
        Self { path, at, stat }
    }

    /// What the thread did since this read.
    ///
    /// # Panics
    /// If the thread is gone or its schedstat does not parse.
    #[must_use]
    #[expect(clippy::cast_precision_loss, reason = "ns, for seconds")]
    pub fn since(&self) -> Spun {
        let now = profiler_fixtures::schedstat(&self.path);
        let waited = (now.run_delay_ns - self.stat.run_delay_ns) as f64 / 1e9;
        Spun {
            on_cpu: (now.on_cpu_ns - self.stat.on_cpu_ns) as f64 / 1e9,
            current: self.at.elapsed().as_secs_f64() - waited,
        }
    }
}

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

/// The host's CPU time, from `/proc/stat`: the time its CPUs ran or
/// wanted to, and what the hypervisor stole of it.
pub struct HostSteal {
    busy: u64,
    stolen: u64,
}

impl HostSteal {
    /// Reads `/proc/stat` now.
    ///
    /// # Panics
    /// If `/proc/stat` does not parse.
    #[must_use]
    pub fn read() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
        let ticks: Vec<u64> = stat
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("cpu "))
            .expect("/proc/stat's cpu line")
            .split_whitespace()
            .map(|t| t.parse().expect("/proc/stat's ticks"))
            .collect();
        // user nice system idle iowait irq softirq steal (guest time is
        // in user's already).
        let [user, nice, system, _idle, _iowait, irq, softirq, steal, ..] = ticks[..] else {
            panic!("/proc/stat's cpu line: {ticks:?}");
        };
        Self {
            busy: user + nice + system + irq + softirq + steal,
            stolen: steal,
        }
    }

    /// Of the time the host's CPUs ran or wanted to since this read, the
    /// share the hypervisor stole: a thread current on a CPU meanwhile
    /// was, by that share on average, not running although a sampling
    /// timer found it there.
    #[must_use]
    #[expect(clippy::cast_precision_loss, reason = "ticks, for a share")]
    pub fn share_since(&self) -> f64 {
        let now = Self::read();
        let busy = now.busy.saturating_sub(self.busy);
        now.stolen.saturating_sub(self.stolen) as f64 / busy.max(1) as f64
    }
}

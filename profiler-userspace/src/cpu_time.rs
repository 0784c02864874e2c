//! Where the daemon's CPU goes: each step of its work adds the CPU time of
//! the thread that ran it (`CLOCK_THREAD_CPUTIME_ID`) to a process-wide
//! total, exported in `/metrics` (`profiler_cpu_seconds_total{step}`) and
//! read by the bench's churn section. Steps do not nest: each is timed
//! where its work is, so the totals add up, and what no step covers is
//! the process's CPU less their sum.
use std::sync::atomic::{AtomicU64, Ordering};

/// A step of the daemon's work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Reading `/proc/PID/maps` of a process the kernel asked about.
    MapsRead,
    /// Identifying its mapped files (their stamps and build ids).
    BinaryIds,
    /// Building and placing the unwind tables of binaries new to it, and
    /// its mapping list.
    Tables,
    /// Writing its mapping list to the kernel.
    MappingsPublish,
    /// Publishing it to the runtimes the walk reads (Python, Java, Go
    /// labels, OpenTelemetry's thread context).
    Runtimes,
    /// Its snapshot for the symbolizer (the same mappings, build ids and
    /// root).
    Snapshots,
    /// Finding which processes have exited.
    Exits,
    /// Reading the kernel's mmap and exec records.
    Records,
    /// The runtimes' readers (the goroutine view's).
    RuntimeReads,
    /// Symbolizing and assembling windows.
    Symbolize,
    /// Taking the kernel's requests from its maps (mappings', and the
    /// runtimes' frames and label sets) and serving the runtimes'.
    Requests,
    /// Draining the window's maps (samples, stacks, wakers) and the
    /// intervals still open.
    Drain,
}

impl Step {
    /// Every step, in index order.
    pub const ALL: [Self; 12] = [
        Self::MapsRead,
        Self::BinaryIds,
        Self::Tables,
        Self::MappingsPublish,
        Self::Runtimes,
        Self::Snapshots,
        Self::Exits,
        Self::Records,
        Self::RuntimeReads,
        Self::Symbolize,
        Self::Requests,
        Self::Drain,
    ];

    /// Its name in `/metrics` (`step` label).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::MapsRead => "maps_read",
            Self::BinaryIds => "binary_ids",
            Self::Tables => "unwind_tables",
            Self::MappingsPublish => "mappings_publish",
            Self::Runtimes => "runtimes_publish",
            Self::Snapshots => "snapshots",
            Self::Exits => "exits",
            Self::Records => "mmap_records",
            Self::RuntimeReads => "runtime_reads",
            Self::Symbolize => "symbolize",
            Self::Requests => "requests",
            Self::Drain => "drain",
        }
    }
}

/// Nanoseconds of CPU per step, indexed as [`Step::ALL`].
static TOTALS: [AtomicU64; Step::ALL.len()] = [const { AtomicU64::new(0) }; Step::ALL.len()];

/// The calling thread's CPU time, in nanoseconds.
#[must_use]
pub fn thread_cpu_ns() -> u64 {
    crate::clock::now_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Runs `work`, adding the CPU time it took this thread to `step`.
pub fn timed<T>(step: Step, work: impl FnOnce() -> T) -> T {
    let start = thread_cpu_ns();
    let out = work();
    add(step, thread_cpu_ns().saturating_sub(start));
    out
}

/// Times consecutive steps of one piece of work with one clock read
/// between each (the clock is a system call: timing each of a process's
/// twenty mappings on its own cost more than some steps).
pub struct Laps {
    last: u64,
}

impl Laps {
    /// Starts timing the first step.
    #[must_use]
    pub fn start() -> Self {
        Self {
            last: thread_cpu_ns(),
        }
    }

    /// Adds the CPU since the last lap (or the start) to `step`.
    pub fn lap(&mut self, step: Step) {
        let now = thread_cpu_ns();
        add(step, now.saturating_sub(self.last));
        self.last = now;
    }
}

/// Adds `ns` of CPU to `step`.
pub fn add(step: Step, ns: u64) {
    TOTALS[step as usize].fetch_add(ns, Ordering::Relaxed);
}

/// Each step's CPU since the daemon started, in nanoseconds.
#[must_use]
pub fn totals() -> [(Step, u64); Step::ALL.len()] {
    Step::ALL.map(|step| (step, TOTALS[step as usize].load(Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_step_adds_the_threads_cpu() {
        let before = totals()[Step::Exits as usize].1;
        let spun = timed(Step::Exits, || {
            let start = thread_cpu_ns();
            while thread_cpu_ns() - start < 2_000_000 {}
            thread_cpu_ns() - start
        });
        let added = totals()[Step::Exits as usize].1 - before;
        // Other tests' steps may add to it meanwhile: a lower bound.
        assert!(added >= spun, "{added} ns added for {spun} ns spun");
    }

    #[test]
    fn laps_add_each_steps_cpu_to_its_own_step() {
        let spin = |ns| {
            let start = thread_cpu_ns();
            while thread_cpu_ns() - start < ns {}
        };
        let before = totals();
        let mut laps = Laps::start();
        spin(1_000_000);
        laps.lap(Step::Records);
        spin(3_000_000);
        laps.lap(Step::Snapshots);
        let after = totals();
        let added = |step: Step| after[step as usize].1 - before[step as usize].1;
        assert!(added(Step::Records) >= 1_000_000);
        assert!(added(Step::Snapshots) >= 3_000_000);
        // Not the first step's CPU again: other tests add little to it.
        assert!(added(Step::Snapshots) < 3_000_000 + 1_000_000);
    }
}

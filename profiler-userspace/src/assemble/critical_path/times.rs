//! Each thread's and goroutine's time in a window, as the critical path
//! and the what-if divide it: on a CPU (by row), waiting for one, and
//! blocked, by what ended the wait.
use std::collections::HashMap;

use profiler_common::sample::ThreadState;

use crate::{
    assemble::wakers::WaitedOn,
    profile::Sample,
    sample::{LabelValue, goroutine_of},
};

/// What waits and works: a thread (pid, tid), or a goroutine (pid, goid)
/// of a process the goroutine view reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    Thread(u32, u32),
    Goroutine(u32, u64),
}

impl Unit {
    /// Whose wait `row` is: a goroutine's for the goroutine view's rows.
    pub fn blocked(row: &Sample) -> Self {
        match goroutine_of(row.labels.as_deref()) {
            Some(goid) if row.runtime_ns != 0 => Self::Goroutine(row.pid, goid),
            _ => Self::Thread(row.pid, row.tid),
        }
    }

    /// The unit that `by` names as having ended this one's wait: none for
    /// an interrupt, the Go runtime, the poller or an unknown waker.
    pub fn waker(self, by: &WaitedOn) -> Option<Self> {
        match (self, by) {
            (_, WaitedOn::Thread { pid, tid, .. }) => Some(Self::Thread(*pid, *tid)),
            (Self::Goroutine(pid, _), WaitedOn::Goroutine(goid)) if *goid != 0 => {
                Some(Self::Goroutine(pid, *goid))
            }
            _ => None,
        }
    }
}

/// Every thread's (and goroutine's) time in the window.
pub type ThreadTimes = HashMap<Unit, ThreadTime>;

/// The waits of a window that name what ended them.
#[derive(Default)]
pub struct Waits {
    /// Threads' blocked rows: (row index, waker).
    pub threads: Vec<(usize, WaitedOn)>,
    /// Goroutines' waits, as rows of their own (not among the window's:
    /// their time is in the goroutine rows already), with their waker.
    pub goroutines: Vec<(Sample, WaitedOn)>,
}

impl Waits {
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty() && self.goroutines.is_empty()
    }

    /// Each wait's row (in `samples` for a thread's) and its waker.
    pub fn iter<'a>(
        &'a self,
        samples: &'a [Sample],
    ) -> impl Iterator<Item = (&'a Sample, &'a WaitedOn)> {
        let threads = self.threads.iter().map(|(i, by)| (&samples[*i], by));
        threads.chain(self.goroutines.iter().map(|(row, by)| (row, by)))
    }
}

/// One thread's (or goroutine's) time in the window, as the critical path
/// divides it.
#[derive(Default)]
pub struct ThreadTime {
    /// Its on-CPU rows: (row index, ns).
    pub cpu: Vec<(usize, u64)>,
    pub runqueue_ns: u64,
    /// Blocked time, by what woke it.
    pub blocked_by: HashMap<WaitedOn, u64>,
    /// Blocked time no waker names (still off-CPU at the window's end).
    pub unresolved_ns: u64,
}

impl ThreadTime {
    pub fn total_ns(&self) -> u64 {
        self.cpu.iter().map(|&(_, ns)| ns).sum::<u64>()
            + self.runqueue_ns
            + self.blocked_by.values().sum::<u64>()
            + self.unresolved_ns
    }
}

/// Each thread's and goroutine's time, from the window's rows and
/// `waits`, on-CPU rows weighing `period_ns` a sample.
#[must_use]
pub fn thread_times(samples: &[Sample], waits: &Waits, period_ns: u64) -> ThreadTimes {
    let by_row: HashMap<usize, &WaitedOn> = waits.threads.iter().map(|(i, by)| (*i, by)).collect();
    let mut times = ThreadTimes::new();
    for (index, row) in samples.iter().enumerate() {
        // The wakers' twins repeat time counted in their rows.
        if row.waker_ns != 0 || row.goroutine_waker_ns != 0 {
            continue;
        }
        if row.runtime_ns != 0 {
            goroutine_row(&mut times, index, row);
            continue;
        }
        let time = times.entry(Unit::Thread(row.pid, row.tid)).or_default();
        match row.state {
            ThreadState::Running if row.samples != 0 => {
                let ns = row.samples.saturating_mul(period_ns);
                time.cpu.push((index, ns));
                // The goroutine the thread ran, with `--goroutine-wakers`.
                if let Some(goid) = goroutine_of(row.labels.as_deref()) {
                    let goroutine = times.entry(Unit::Goroutine(row.pid, goid));
                    goroutine.or_default().cpu.push((index, ns));
                }
            }
            ThreadState::Runqueue => time.runqueue_ns += row.off_cpu_ns,
            ThreadState::Sleeping | ThreadState::Disk => match by_row.get(&index) {
                Some(&by) => *time.blocked_by.entry(by.clone()).or_default() += row.off_cpu_ns,
                None => time.unresolved_ns += row.off_cpu_ns,
            },
            _ => {}
        }
    }
    // A goroutine's waiting rows are all its waits the reads saw; those
    // that ended (in this window) name their waker.
    for (row, by) in &waits.goroutines {
        let time = times.entry(Unit::blocked(row)).or_default();
        *time.blocked_by.entry(by.clone()).or_default() += row.runtime_ns;
        time.unresolved_ns = time.unresolved_ns.saturating_sub(row.runtime_ns);
    }
    times
}

/// Adds the goroutine view's row at `index` to its goroutine's time: a
/// `runnable` row waits for a CPU, a `syscall` row is the goroutine's own
/// work (in the kernel), a `waiting` row waits (on what, [`Waits`] says).
fn goroutine_row(times: &mut ThreadTimes, index: usize, row: &Sample) {
    let Some(goid) = goroutine_of(row.labels.as_deref()) else {
        return;
    };
    let time = times.entry(Unit::Goroutine(row.pid, goid)).or_default();
    match goroutine_state(row) {
        Some("runnable") => time.runqueue_ns += row.runtime_ns,
        Some("syscall") => time.cpu.push((index, row.runtime_ns)),
        _ => time.unresolved_ns += row.runtime_ns,
    }
}

/// A goroutine row's `state` label (`runtimes::go::GoroutineStatus`).
fn goroutine_state(row: &Sample) -> Option<&'static str> {
    row.labels
        .as_ref()?
        .labels
        .iter()
        .find_map(|l| match l.value {
            LabelValue::Static(state) if l.key == "state" => Some(state),
            _ => None,
        })
}

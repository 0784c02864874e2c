//! Off-CPU intervals still open when a window ends. Each window gets the
//! part of the interval inside it, so a thread blocked for the whole run
//! shows up in every window rather than never.
//!
//! Two kinds of thread are off the CPU at a window's end:
//! - Tracked threads (an entry in `TASKS`, read through a pidfd of each
//!   target thread, with an open interval there or in the thread's cell of
//!   `INTERVAL_CELLS`): their interval is accounted
//!   up to the window's end here and the end is recorded in `IN_FLIGHT`
//!   (by tid), so when the thread comes back the kernel
//!   counts only the rest (the handshake of `handshake.rs`).
//! - Target threads never seen leaving a CPU since the programs were
//!   attached, yet sleeping now (`/proc/<tid>/stat`): they cannot have run
//!   without switching out again, so they have been off the CPU since
//!   before the window began. The kernel has no entry for them, so the
//!   whole window is accounted here.
//!
//! The user stack of a thread that is off the CPU cannot be read (only the
//! thread itself can, when it runs), so these samples carry a
//! `[still off-CPU at window end]` frame over the kernel stack from
//! `/proc/<pid>/task/<tid>/stack`. The sampling rule applies to each part
//! on its own (`off_cpu::sample`), which is as unbiased as the kernel's
//! one draw per interval shared by its parts; for the rest of such an
//! interval the kernel applies the threshold it drew at switch-out, which
//! is independent of this side's draw.
use std::{
    collections::{HashMap as StdHashMap, HashSet},
    os::fd::{AsFd as _, BorrowedFd},
};

use aya::{
    Ebpf,
    maps::{Array, HashMap, Map, MapData},
};
use profiler_common::{
    maps::{IN_FLIGHT, INTERVAL_CELLS, TASKS},
    off_cpu::{Weight, sample, sample_naive, split_interval},
    sample::{ThreadState, comm_str},
};

use super::{
    asleep::{Asleep, kernel_stack, sleeping_state},
    drain::Flip,
    error::{KernelError, take_map},
    handshake::{OpenIntervals, part_to_count},
    rng::Rng,
    tracked_thread::{Cells, ThreadEntry, TrackedThread},
};
use crate::{
    config::{OffCpu, Target},
    process::procfs,
    sample::{RawSample, Stack},
};

/// Counts of what the in-flight accounting did, for the window's comments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InFlightStats {
    /// Tracked threads whose open interval was accounted up to the end.
    pub tracked: u64,
    /// Never-tracked sleeping target threads accounted for the window.
    pub untracked: u64,
}

/// Who a part belongs to and how it is labelled.
struct Thread {
    pid: u32,
    tid: u32,
    name: String,
}

/// The off-CPU intervals still open at a window's end, as the pipeline
/// accounts them: [`Kernel`](super::Kernel) here, an in-memory one in
/// tests (`in_memory.rs`).
pub trait InFlightMaps {
    /// Accounts the off-CPU time of `target`'s threads still off the CPU
    /// at the end of `flip`'s window, up to that end, under the sampling
    /// rule `rule`: the samples, and what was counted.
    ///
    /// # Errors
    /// When the task maps cannot be read or written.
    fn account_in_flight(
        &mut self,
        flip: &Flip,
        rule: OffCpu,
        target: &Target,
        rng: &mut Rng,
    ) -> Result<(Vec<RawSample>, InFlightStats), KernelError>;
}

/// The maps of the threads' open intervals, taken from the loaded object:
/// the task entries, the interval cells and the ends accounted here; and
/// what was read of threads asleep since before loading.
pub(super) struct InFlight {
    tasks: Map,
    /// `IN_FLIGHT`: where this side stopped counting each interval.
    accounted_to: Map,
    cells: Map,
    asleep: Asleep,
}

impl InFlight {
    /// Takes the maps out of `ebpf`.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, KernelError> {
        Ok(Self {
            tasks: take_map(ebpf, TASKS)?,
            accounted_to: take_map(ebpf, IN_FLIGHT)?,
            cells: take_map(ebpf, INTERVAL_CELLS)?,
            asleep: Asleep::default(),
        })
    }
}

impl InFlightMaps for InFlight {
    /// Each tracked thread's open interval is shared with the kernel by the
    /// handshake of `handshake.rs`.
    fn account_in_flight(
        &mut self,
        flip: &Flip,
        rule: OffCpu,
        target: &Target,
        rng: &mut Rng,
    ) -> Result<(Vec<RawSample>, InFlightStats), KernelError> {
        let Map::Unsupported(tasks) = &self.tasks else {
            return Err(KernelError::MapType { name: TASKS });
        };
        let in_flight: HashMap<&mut MapData, u32, u64> =
            HashMap::try_from(&mut self.accounted_to).map_err(KernelError::map(IN_FLIGHT))?;
        let mut window = EndOfWindow {
            flip,
            rule,
            accounted: in_flight.iter().filter_map(Result::ok).collect(),
            tasks: tasks.fd().as_fd(),
            cells: Cells {
                map: Array::try_from(&mut self.cells).map_err(KernelError::map(INTERVAL_CELLS))?,
                in_use: rule.interval_cells,
            },
            in_flight,
            samples: Vec::new(),
            stats: InFlightStats::default(),
            still_away: HashSet::new(),
        };
        let pids = match target {
            Target::Pids(pids) => pids.clone(),
            // Not the daemon's own waits (`UNPROFILED_PID`).
            Target::All => {
                let own = std::process::id();
                procfs::pids().into_iter().filter(|&p| p != own).collect()
            }
        };
        for pid in pids {
            window.process(&mut self.asleep, pid, rng)?;
        }
        window.forget_unused();
        self.asleep.end_window();
        Ok((window.samples, window.stats))
    }
}

/// The window being ended: the maps, and what the accounting found.
struct EndOfWindow<'a> {
    flip: &'a Flip,
    rule: OffCpu,
    /// `IN_FLIGHT` as it was: where earlier windows stopped counting.
    accounted: StdHashMap<u32, u64>,
    tasks: BorrowedFd<'a>,
    cells: Cells<'a>,
    in_flight: HashMap<&'a mut MapData, u32, u64>,
    samples: Vec<RawSample>,
    stats: InFlightStats,
    /// Tracked threads still off the CPU: their `IN_FLIGHT` entry stays.
    still_away: HashSet<u32>,
}

impl EndOfWindow<'_> {
    /// The parts of process `pid`'s threads. A process whose every thread
    /// was asleep and untracked at the last window's end, and none has run
    /// since, has no new thread either (only a thread that runs makes
    /// one), so its threads are not listed again.
    fn process(&mut self, asleep: &mut Asleep, pid: u32, rng: &mut Rng) -> Result<(), KernelError> {
        if let Some(threads) = asleep.process_still_asleep(pid) {
            for (tid, state) in threads {
                self.asleep_part(asleep, pid, tid, state, rng);
            }
            return Ok(());
        }
        let tids = procfs::tids(pid);
        let mut all_asleep = !tids.is_empty();
        // One thread at a time, so only one pidfd is open at once (a
        // machine has more threads than the daemon may open files).
        for &tid in &tids {
            all_asleep &= self.thread(asleep, pid, tid, rng)?;
        }
        if all_asleep {
            asleep.whole_process(pid, tids);
        }
        Ok(())
    }

    /// The part of thread `tid`; true if it is asleep and untracked, and
    /// known to be until it runs.
    fn thread(
        &mut self,
        asleep: &mut Asleep,
        pid: u32,
        tid: u32,
        rng: &mut Rng,
    ) -> Result<bool, KernelError> {
        if let Some(state) = asleep.still_asleep(pid, tid) {
            self.asleep_part(asleep, pid, tid, state, rng);
            return Ok(true);
        }
        match TrackedThread::open(self.tasks, &self.cells, tid)? {
            ThreadEntry::Tracked(thread) => {
                if self.account(&thread, rng)? {
                    self.stats.tracked += 1;
                }
                if thread.open.off_since_ns != 0 {
                    self.still_away.insert(tid);
                }
                Ok(false)
            }
            ThreadEntry::Untracked => {
                // Asleep since before the programs were attached?
                let Some(state) = sleeping_state(pid, tid) else {
                    return Ok(false);
                };
                let known = asleep.found(pid, tid, state, || {
                    TrackedThread::open(self.tasks, &self.cells, tid)
                        .map(|entry| matches!(entry, ThreadEntry::Untracked))
                })?;
                self.asleep_part(asleep, pid, tid, state, rng);
                Ok(known)
            }
            ThreadEntry::Unreadable => Ok(false),
        }
    }

    /// The whole window of a thread asleep (in `state`) since before the
    /// programs were attached.
    fn asleep_part(
        &mut self,
        asleep: &mut Asleep,
        pid: u32,
        tid: u32,
        state: ThreadState,
        rng: &mut Rng,
    ) {
        self.stats.untracked += 1;
        let thread = Thread {
            pid,
            tid,
            name: asleep.name(pid, tid),
        };
        let length = self.flip.end_ns - self.flip.start_ns;
        let stack = || asleep.kernel_stack(pid, tid);
        push_part(
            &mut self.samples,
            &thread,
            state,
            length,
            self.rule,
            rng,
            stack,
        );
    }

    /// The handshake for one tracked thread (`handshake.rs`); true if its
    /// open interval was counted here.
    fn account(&mut self, thread: &TrackedThread, rng: &mut Rng) -> Result<bool, KernelError> {
        let (task, open, end) = (&thread.state, &thread.open, self.flip.end_ns);
        let accounted_to = self.accounted.get(&thread.tid).copied();
        let mut kernel = ThreadMaps {
            in_flight: &mut self.in_flight,
            tasks: self.tasks,
            cells: &self.cells,
            thread,
        };
        let Some(start) = part_to_count(
            &mut kernel,
            thread.tid,
            open.off_since_ns,
            accounted_to,
            end,
        )?
        else {
            return Ok(false);
        };
        let left_in = ThreadState::off_cpu(open.left_with);
        let preempted = left_in == ThreadState::Runqueue;
        // When a blocked thread was woken is not known here (only the
        // scheduler's run-queue total is, at switch-in): up to the window's
        // end the interval counts as blocked, unless it was preempted.
        let (blocked, runqueue) = split_interval(preempted, start, end, 0);
        let named = Thread {
            pid: task.pid,
            tid: thread.tid,
            name: String::from_utf8_lossy(comm_str(&task.comm)).into_owned(),
        };
        let stack = || kernel_stack(task.pid, thread.tid);
        let samples = &mut self.samples;
        push_part(samples, &named, left_in, blocked, self.rule, rng, stack);
        let runqueue_state = ThreadState::Runqueue;
        push_part(
            samples,
            &named,
            runqueue_state,
            runqueue,
            self.rule,
            rng,
            stack,
        );
        Ok(true)
    }

    /// Removes the entries the kernel will never use: the thread is back
    /// (the kernel deletes the entry when it uses it) or gone.
    fn forget_unused(&mut self) {
        for tid in self.accounted.keys() {
            if !self.still_away.contains(tid) {
                let _ = self.in_flight.remove(tid);
            }
        }
    }
}

/// The kernel's maps as the handshake sees one tracked thread.
struct ThreadMaps<'m, 'a> {
    in_flight: &'m mut HashMap<&'a mut MapData, u32, u64>,
    tasks: BorrowedFd<'a>,
    cells: &'m Cells<'a>,
    thread: &'m TrackedThread,
}

impl OpenIntervals for ThreadMaps<'_, '_> {
    type Error = KernelError;

    fn mark(&mut self, tid: u32, end: u64) -> Result<(), KernelError> {
        self.in_flight
            .insert(tid, end, 0)
            .map_err(KernelError::map(IN_FLIGHT))
    }

    fn marked(&mut self, tid: u32) -> bool {
        self.in_flight.get(&tid, 0).is_ok()
    }

    fn unmark(&mut self, tid: u32) {
        let _ = self.in_flight.remove(&tid);
    }

    fn off_since(&mut self, _tid: u32) -> Result<Option<u64>, KernelError> {
        Ok(self
            .thread
            .reread(self.tasks, self.cells)?
            .map(|now| now.off_since_ns))
    }
}

/// Applies the sampling rule to one part and keeps it as a sample, with the
/// kernel stack `stack` reads.
fn push_part(
    samples: &mut Vec<RawSample>,
    thread: &Thread,
    state: ThreadState,
    d_ns: u64,
    rule: OffCpu,
    rng: &mut Rng,
    stack: impl FnOnce() -> Stack,
) {
    if d_ns == 0 {
        return;
    }
    let apply = if rule.naive_weights {
        sample_naive
    } else {
        sample
    };
    let Some(Weight { time_ns, count }) = apply(d_ns, rule.rate_ns, rng.next_u32()) else {
        return;
    };
    samples.push(RawSample {
        pid: thread.pid,
        tid: thread.tid,
        thread: thread.name.clone(),
        state,
        user_stack: Stack::StillOffCpu,
        kernel_stack: stack(),
        samples: 0,
        off_cpu_ns: time_ns,
        off_cpu_count: count,
        labels: None,
        runtime_ns: 0,
        label_set: None,
        thread_attrs: None,
        woken_by: None,
    });
}

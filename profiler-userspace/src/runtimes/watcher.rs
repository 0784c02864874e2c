//! What a runtime's thread (`thread.rs`) does: which targets run the
//! runtime (looked at again every second), and one read of the units of
//! each at every tick, kept until the daemon takes them.
use std::{
    collections::{BTreeSet, HashMap},
    fs,
    os::unix::fs::MetadataExt as _,
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use super::{
    binaries::Binaries,
    seam::{Loaded, Runtime, RuntimeProcess},
};
use crate::{
    config::Target,
    cpu_time::{self, Step},
    process::maps::FileId,
    process::procfs,
};
pub(super) use shared::{Collected, KeyOf, Shared};
use shared::{RowKey, SETTLE};

/// How often the target set is looked at again for new processes of the
/// runtime.
const REFRESH: Duration = Duration::from_secs(1);

/// Under `--all`, `/proc` is listed at every this many refreshes (10 s):
/// between, the new processes are those the daemon saw start or exec
/// (the daemon's `Runtimes::notice`), and a process that appeared
/// otherwise (forked, never sampled) is found at the next listing.
const LIST_EVERY: u64 = 10;

/// Known processes that do not run the runtime are looked at again (for
/// an exec into one of its binaries) this many at each refresh, or a
/// tenth of them if more: with a few targets, every refresh looks at all
/// of them; under `--all` on a busy host, each within 10 refreshes, not
/// hundreds of `statx` a second.
const RECHECK_AT_LEAST: usize = 32;
const RECHECK_ROUNDS: usize = 10;
/// Looks (at refreshes, or when noticed) at which a process running the
/// runtime's binary is tried again when it could not be attached
/// ([`Loaded::NotNow`]: caught mid-exec, its new executable named but not
/// mapped yet), before it is taken for one that cannot be read.
const ATTACH_TRIES: u32 = 5;
/// The most units read per second, over all the runtime's processes
/// (shared equally): above it each read takes a rotating one in N of a
/// process's list, each standing for N.
const MAX_PER_SECOND: u64 = 20_000;

struct Watched<P> {
    file: FileId,
    process: Option<P>,
    last_read: Instant,
    /// Reads so far: which 1-in-N rotation comes next.
    reads: usize,
}

pub(super) struct Watcher<R: Runtime> {
    runtime: R,
    /// The most units one round of reads takes, over all processes.
    budget: usize,
    /// Per binary: what the runtime loaded, or `None` (not the runtime's,
    /// or not readable).
    binaries: Binaries<R::Binary>,
    processes: HashMap<u32, Watched<R::Process>>,
    /// Processes to look at again at the next refresh, whatever the
    /// target set's listing says, and the tries so far
    /// ([`ATTACH_TRIES`]).
    retry: HashMap<u32, u32>,
    /// Where the next turn of looking at known processes that do not run
    /// the runtime starts.
    recheck: usize,
    /// Refreshes so far, for [`LIST_EVERY`].
    refreshes: u64,
}

impl<R: Runtime> Watcher<R> {
    /// A watcher for `frequency_hz` reads a second, within
    /// [`MAX_PER_SECOND`] units a second.
    pub(super) fn new(runtime: R, frequency_hz: u64) -> Self {
        let budget = MAX_PER_SECOND / frequency_hz.max(1);
        Self {
            runtime,
            budget: usize::try_from(budget).unwrap_or(usize::MAX).max(1),
            binaries: Binaries::default(),
            processes: HashMap::new(),
            retry: HashMap::new(),
            recheck: 0,
            refreshes: 0,
        }
    }

    /// Refreshes and reads every `period` until `shared` says stop. Woken
    /// early (by the daemon's `Runtimes::notice`), it looks at the
    /// processes noticed since, and reads when due.
    pub(super) fn run(mut self, shared: &Shared<KeyOf<R>>, period: Duration) {
        let mut next_refresh = Instant::now();
        let mut next_read = Instant::now();
        // The thread's CPU is all reads: accounted at each refresh, not
        // timed around each read (with two clock reads a read, the view of
        // `goroutine_busy.rs` read 0.952 to 0.997 of the truth in five
        // runs; without, 0.972 to 1.020).
        let mut accounted = cpu_time::thread_cpu_ns();
        while !shared.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let refresh = now >= next_refresh;
            let waiting = self.look(shared, refresh, now);
            if refresh {
                next_refresh = now + REFRESH;
                if let Ok(mut collected) = shared.collected.lock() {
                    collected.stats.binaries_known = self.binaries.len() as u64;
                }
                let cpu = cpu_time::thread_cpu_ns();
                cpu_time::add(Step::RuntimeReads, cpu.saturating_sub(accounted));
                accounted = cpu;
            }
            if now >= next_read {
                let late = now.duration_since(next_read) > period / 4;
                self.read_into(shared, late);
                next_read = (next_read + period).max(Instant::now());
            }
            // With no process of the runtime to read, nothing is due before the next
            // look at the targets.
            let mut wake = if self.processes.values().any(|w| w.process.is_some()) {
                next_read.min(next_refresh)
            } else {
                next_refresh
            };
            // The processes noticed but not settled, looked at together: at
            // most one wakeup per `SETTLE` however many start.
            if let Some(oldest) = waiting {
                wake = wake.min((oldest + SETTLE).max(now + SETTLE));
            }
            // Woken early by `notice` (when nothing was waiting) and by `Drop`.
            std::thread::park_timeout(wake.saturating_duration_since(Instant::now()));
        }
    }

    /// Takes the noticed processes that have settled, and refreshes the
    /// targets (when `refresh`) or looks at those only; returns when the
    /// oldest noticed process left waiting was noticed.
    fn look(&mut self, shared: &Shared<KeyOf<R>>, refresh: bool, now: Instant) -> Option<Instant> {
        let (noticed, waiting) = shared.take_settled(now);
        if !refresh && noticed.is_empty() {
            return waiting;
        }
        let Ok(target) = shared.target.lock().map(|t| t.clone()) else {
            return waiting;
        };
        if refresh {
            self.refresh(&target, &noticed);
        } else {
            self.look_at_noticed(&target, &noticed);
        }
        waiting
    }

    /// One read of every process of the runtime, added to what `shared`
    /// collected; `late` when it began more than a quarter of a period
    /// after it was due (counted: on a host whose CPUs are busy a late
    /// tick tends to land when a thread has just gone to sleep).
    fn read_into(&mut self, shared: &Shared<KeyOf<R>>, late: bool) {
        let mut local = Collected::<KeyOf<R>>::default();
        local.stats.late_ticks = u64::from(late);
        self.read_all(&mut local);
        if let Ok(mut collected) = shared.collected.lock() {
            for (key, ns) in local.rows {
                *collected.rows.entry(key).or_default() += ns;
            }
            collected.pids.extend(local.pids);
            collected.stats.add(&local.stats);
        }
    }

    /// Looks at the targets again: new processes are attached (if they run
    /// the runtime), gone ones forgotten, and known ones that do not looked at in
    /// turns (see [`RECHECK_AT_LEAST`]). Under `--all`, the new ones are
    /// those `noticed` but at every [`LIST_EVERY`]th refresh.
    fn refresh(&mut self, target: &Target, noticed: &BTreeSet<u32>) {
        let list = self.refreshes.is_multiple_of(LIST_EVERY);
        self.refreshes += 1;
        let pids: BTreeSet<u32> = match target {
            Target::All if list => procfs::pids().into_iter().collect(),
            Target::All => self
                .processes
                .keys()
                .chain(noticed)
                .chain(self.retry.keys())
                .copied()
                .collect(),
            Target::Pids(pids) => pids.iter().copied().collect(),
        };
        self.retry.retain(|pid, _| pids.contains(pid));
        self.processes.retain(|pid, _| pids.contains(pid));
        // A noticed process may be known as not the runtime's: it exec'd
        // since.
        let (not_go, others): (Vec<u32>, Vec<u32>) = pids.into_iter().partition(|pid| {
            !noticed.contains(pid) && self.processes.get(pid).is_some_and(|w| w.process.is_none())
        });
        for pid in others {
            self.look_at(pid);
        }
        self.recheck_in_turns(&not_go);
        self.binaries
            .end_refresh(self.processes.values().map(|w| w.file));
    }

    /// Looks at the targets among `noticed` (they started or exec'd) between
    /// refreshes, as a refresh would.
    fn look_at_noticed(&mut self, target: &Target, noticed: &BTreeSet<u32>) {
        for &pid in noticed {
            let targeted = match target {
                Target::All => true,
                Target::Pids(pids) => pids.contains(&pid),
            };
            if targeted {
                self.look_at(pid);
            }
        }
    }

    /// Looks at a turn of the known processes that do not run the runtime.
    fn recheck_in_turns(&mut self, not_go: &[u32]) {
        let turn = not_go.len().div_ceil(RECHECK_ROUNDS).max(RECHECK_AT_LEAST);
        if not_go.len() <= turn {
            for &pid in not_go {
                self.look_at(pid);
            }
            return;
        }
        let start = self.recheck % not_go.len();
        self.recheck = start + turn;
        for &pid in not_go.iter().cycle().skip(start).take(turn) {
            self.look_at(pid);
        }
    }

    /// Attaches to `pid` if it is new or runs another binary than when
    /// last looked at (it exec'd), or could not be attached when last
    /// looked at.
    fn look_at(&mut self, pid: u32) {
        // Gone (most noticed processes of a build are, once settled):
        // forgotten now, not rechecked until the next listing; told by a
        // pid lookup, cheaper than the path walk to its executable. No
        // executable (a kernel thread): not the runtime's, looked at again
        // in turns like the others.
        if !procfs::exists(pid) {
            self.processes.remove(&pid);
            self.retry.remove(&pid);
            return;
        }
        let file = match fs::metadata(format!("/proc/{pid}/exe")) {
            Ok(meta) => FileId {
                dev: meta.dev(),
                inode: meta.ino(),
            },
            Err(_) => FileId { dev: 0, inode: 0 },
        };
        if self.processes.get(&pid).is_some_and(|w| w.file == file) {
            return;
        }
        let process = match (file.inode != 0).then(|| self.attach(pid, file)) {
            Some(Loaded::Runtime(process)) => Some(process),
            Some(Loaded::NotNow) => {
                // Not remembered as not the runtime's: tried again at the
                // next refresh (the listing under `--all` comes every 10 s,
                // and a process that keeps its mappings asks nothing more).
                let tries = self.retry.entry(pid).or_default();
                *tries += 1;
                if *tries < ATTACH_TRIES {
                    self.processes.remove(&pid);
                    return;
                }
                None
            }
            Some(Loaded::Not) | None => None,
        };
        self.retry.remove(&pid);
        self.processes.insert(
            pid,
            Watched {
                file,
                process,
                last_read: Instant::now(),
                reads: 0,
            },
        );
    }

    /// Attaches to `pid`, which runs `file`: `NotNow` when `file` is the
    /// runtime's but the process cannot be read now, or its executable
    /// cannot.
    fn attach(&mut self, pid: u32, file: FileId) -> Loaded<R::Process> {
        let runtime = &self.runtime;
        match self.binaries.get_or_load(file, || runtime.load(pid, file)) {
            Loaded::Runtime(binary) => runtime
                .attach(pid, file, &binary)
                .map_or(Loaded::NotNow, Loaded::Runtime),
            Loaded::Not => Loaded::Not,
            Loaded::NotNow => Loaded::NotNow,
        }
    }

    /// One read of every process of the runtime; one whose read failed is looked at
    /// again at once (it may have exited or exec'd).
    fn read_all(&mut self, out: &mut Collected<KeyOf<R>>) {
        let mut failed = Vec::new();
        let go = self
            .processes
            .values()
            .filter(|w| w.process.is_some())
            .count();
        let budget = (self.budget / go.max(1)).max(1);
        for (&pid, watched) in &mut self.processes {
            let Some(process) = watched.process.as_mut() else {
                continue;
            };
            let now = Instant::now();
            let elapsed = now
                .duration_since(watched.last_read)
                .min(Duration::from_secs(1));
            watched.last_read = now;
            watched.reads += 1;
            let elapsed_ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
            let (stride, observed, ended) = match process.read(budget, watched.reads, elapsed_ns) {
                Ok(read) => {
                    out.stats.torn += read.torn;
                    (read.stride, read.units, read.ended)
                }
                Err(e) => {
                    log::debug!(
                        "pid {pid}: {}: {}",
                        R::KIND.thread_name(),
                        crate::error_chain(&e)
                    );
                    out.stats.dropped += 1;
                    failed.push(pid);
                    continue;
                }
            };
            out.stats.reads += 1;
            out.stats.units += observed.len() as u64;
            out.pids.insert(pid);
            let weight = elapsed_ns * stride as u64;
            let ended = ended.into_iter();
            for (unit, weight) in observed.into_iter().map(|u| (u, weight)).chain(ended) {
                let key = RowKey {
                    pid,
                    key: unit.key,
                    stack: unit.stack,
                };
                *out.rows.entry(key).or_default() += weight;
            }
        }
        for pid in failed {
            self.look_at(pid);
        }
    }
}

mod shared;
#[cfg(test)]
mod tests;

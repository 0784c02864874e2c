//! What the symbolizer knows of each process: its name, placement and
//! executable mappings, read at the window's end and, for processes that
//! may be gone by then, earlier: when the kernel first sees them or sees
//! them exec (a `ProcessSnapshot` of `process/`, taken by the daemon while
//! they live).
//!
//! A process that execs within a window has two images in it. Each read
//! of different mappings is kept as a *generation*; a stack is symbolized
//! with the newest generation that maps all of its frames (addresses of
//! the old image fall outside the new image's mappings, both being placed
//! at random; where they are not, both map the same file the same way).
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::{
    anonymous::AnonymousCache,
    convert::{find_vma, native_lookups},
    resource::{self, Context, ContextCounts},
};
use crate::{
    process::cgroup::{self, Placement},
    process::procfs,
    process::{maps, recorded::RecordedImage, roots::Roots, snapshot::ProcessSnapshot},
};

mod generation;

pub(super) use generation::{Generation, binary_path};

/// Most generations kept per process within a window: a process that
/// execs more often than this keeps its newest images.
const MAX_GENERATIONS: usize = 4;

/// Windows a process that is gone is kept unseen, when it was not found
/// gone at a window's end before: its last samples may come with the
/// window after the one it exited in. One found gone at a window's end
/// (most of a build's, found at the end of the window of their samples)
/// goes at the next end it has no samples at: it exited before that
/// earlier end was read, so its samples came by the next.
const GONE_AFTER_WINDOWS: u64 = 2;

pub(super) struct ProcessInfo {
    pub comm: Arc<str>,
    /// Its cgroup, container and unit (`cgroup.rs`).
    pub placement: Arc<Placement>,
    /// Its images this window, oldest first; never empty.
    generations: Vec<Generation>,
    /// Whether the newest generation is what `/proc/PID/maps` showed at
    /// this window's end (the process still runs that image).
    current: bool,
    pub last_seen: u64,
    /// The window at whose end it was first found gone.
    gone_since: Option<u64>,
    /// The window whose end last read `/proc/PID/maps` (or tried to).
    refreshed: u64,
    /// Results for addresses outside files (JIT code, vDSO).
    pub anonymous: AnonymousCache,
    /// What its OpenTelemetry SDK published in its process context, as
    /// read at the last window's end it ran at.
    pub context: Option<Arc<Context>>,
}

impl ProcessInfo {
    /// Notes that it was found gone (not `alive`) at `window`'s end.
    fn found_gone(&mut self, alive: bool, window: u64) {
        if !alive && self.gone_since.is_none() {
            self.gone_since = Some(window);
        }
    }

    /// The generation `frames` (leaf first) belong to: the newest one that
    /// maps every frame, else the one that maps the most.
    pub fn generation_of(&self, frames: &[u64]) -> usize {
        let mapped = |g: &Generation| {
            native_lookups(frames)
                .filter(|&a| find_vma(&g.vmas, a).is_some())
                .count()
        };
        let newest = self.generations.len() - 1;
        (0..=newest)
            .rev()
            .max_by_key(|&i| (mapped(&self.generations[i]), i))
            .unwrap_or(newest)
    }

    pub fn generation(&self, index: usize) -> &Generation {
        &self.generations[index.min(self.generations.len() - 1)]
    }

    /// Whether `index` is the image the process runs now.
    pub fn is_current(&self, index: usize) -> bool {
        self.current && index + 1 == self.generations.len()
    }

    /// Adds `generation` as the newest, unless the newest has the same
    /// mappings. Build ids one image lacks are taken from another that
    /// maps the same file at the same place: the kernel's record of a
    /// mapping has none when the file's note was not in memory, and a
    /// snapshot read as the process exits none at all (its `map_files`
    /// are gone), while an earlier read of the live process had them.
    fn add_generation(&mut self, mut generation: Generation) {
        for known in &mut self.generations {
            generation.fill_from(known);
            known.fill_from(&generation);
        }
        if let Some(last) = self
            .generations
            .last_mut()
            .filter(|last| last.same_mappings(&generation))
        {
            last.absorb(generation);
            return;
        }
        self.generations.push(generation);
        if self.generations.len() > MAX_GENERATIONS {
            self.generations.remove(0);
        }
    }
}

/// How a process's mappings are known at a window's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mappings {
    /// Read now.
    Read,
    /// Gone, but read while it lived (first seen, or exec).
    Remembered,
    /// Gone, and never read.
    Unreadable,
}

/// Every process the symbolizer knows.
#[derive(Default)]
pub(super) struct Processes {
    /// Boxed: a build host's table holds a thousand processes or more,
    /// whose buckets are then a pointer each, not a whole process's fields.
    map: FxHashMap<u32, Box<ProcessInfo>>,
    /// The roots of processes read here, held open.
    roots: Roots,
    /// Roots that could not be held since the last take, by cause
    /// ([`Unheld::index`]), here or in the snapshots taken in.
    unheld: [u64; 3],
    /// Process contexts read since the last take.
    contexts: ContextCounts,
}

impl Processes {
    pub fn get(&self, pid: u32) -> Option<&ProcessInfo> {
        self.map.get(&pid).map(Box::as_ref)
    }

    pub fn get_mut(&mut self, pid: u32) -> Option<&mut ProcessInfo> {
        self.map.get_mut(&pid).map(Box::as_mut)
    }

    #[cfg(test)]
    pub fn contains(&self, pid: u32) -> bool {
        self.map.contains_key(&pid)
    }

    /// The roots that could not be held since the last take, by cause.
    pub fn take_unheld(&mut self) -> [u64; 3] {
        std::mem::take(&mut self.unheld)
    }

    /// The process contexts read since the last take.
    pub fn take_contexts(&mut self) -> ContextCounts {
        std::mem::take(&mut self.contexts)
    }

    /// A new window: only each process's newest image is still needed.
    pub fn start_window(&mut self) {
        for process in self.map.values_mut() {
            let newest = process.generations.len().saturating_sub(1);
            process.generations.drain(..newest);
            process.current = false;
        }
    }

    /// Adds what `snapshot` read while the process lived.
    pub fn remember(&mut self, snapshot: &ProcessSnapshot, window: u64) {
        if let Some(cause) = snapshot.unheld {
            self.unheld[cause.index()] += 1;
        }
        let process = self.entry(snapshot.pid, "", window);
        if let Some(comm) = &snapshot.comm {
            process.comm = comm.clone();
        }
        if let Some(placement) = &snapshot.placement {
            process.placement = placement.clone();
        }
        process.add_generation(Generation::of_snapshot(snapshot));
        process.last_seen = window;
    }

    /// Adds an image the kernel's records told of (the process may have
    /// exec'd or exited since).
    pub fn remember_recorded(&mut self, image: &RecordedImage, window: u64) {
        let process = self.entry(image.pid, "", window);
        if let Some(comm) = &image.comm {
            process.comm = comm.clone();
        }
        process.add_generation(Generation::recorded(image));
        process.last_seen = window;
    }

    /// `pid`'s entry, made with the name `comm` if there is none; a new
    /// entry counts as not read at this window's end.
    fn entry(&mut self, pid: u32, comm: &str, window: u64) -> &mut ProcessInfo {
        self.map.entry(pid).or_insert_with(|| {
            Box::new(ProcessInfo {
                comm: Arc::from(comm),
                placement: Arc::default(),
                generations: Vec::new(),
                current: false,
                last_seen: window,
                gone_since: None,
                refreshed: 0,
                anonymous: AnonymousCache::default(),
                context: None,
            })
        })
    }

    /// Reads the name and placement of `pid` if it is not known yet, for a
    /// sample with no user frames (a thread asleep all window, a kernel
    /// thread): its mappings are not needed, so they are not read.
    pub fn know(&mut self, pid: u32, thread: &str, window: u64) {
        if let Some(process) = self.map.get_mut(&pid) {
            process.last_seen = window;
            return;
        }
        // Gone (most of a build's by the window's end): nothing to read.
        let alive = procfs::exists(pid);
        let comm = alive.then(|| procfs::comm(pid, pid)).flatten();
        let placement = alive.then(|| cgroup::read(pid)).flatten();
        let process = self.entry(pid, thread, window);
        process.found_gone(alive, window);
        if let Some(comm) = comm.map(Arc::<str>::from) {
            process.comm = comm;
        }
        if let Some(placement) = placement {
            process.placement = Arc::new(placement);
        }
        process.generations.push(Generation::empty());
    }

    /// Reads `pid`'s mappings, name and placement at this window's end
    /// (once per window: `None` when done already), keeping what was read
    /// before when it is gone.
    pub fn refresh(&mut self, pid: u32, thread: &str, window: u64) -> Option<Mappings> {
        if self.map.get(&pid).is_some_and(|p| p.refreshed == window) {
            return None;
        }
        // A process gone (most of a build's by the window's end) is known
        // by one pid lookup, not by three failing path walks.
        let alive = procfs::exists(pid);
        let (comm, placement, (vmas, ctx)) = if alive {
            (
                procfs::comm(pid, pid).map(Arc::<str>::from),
                cgroup::read(pid).map(Arc::new),
                maps::read_with_ctx(pid).ok().unzip(),
            )
        } else {
            (None, None, (None, None))
        };
        let contexts = &mut self.contexts;
        let context = ctx.map(|ctx| ctx.and_then(|at| resource::read(pid, at, contexts)));
        let process = self.entry(pid, thread, window);
        process.refreshed = window;
        process.last_seen = window;
        process.found_gone(alive, window);
        if let Some(comm) = comm {
            process.comm = comm;
        }
        if let Some(placement) = placement {
            process.placement = placement;
        }
        if let Some(context) = context {
            process.context = context;
        }
        if let Some(vmas) = vmas {
            let roots = &mut self.roots;
            let process = self.map.get_mut(&pid).expect("entered above");
            let (generation, unheld) =
                Generation::read(pid, vmas, process.generations.last(), roots);
            process.add_generation(generation);
            if let Some(cause) = unheld {
                self.unheld[cause.index()] += 1;
            }
            process.current = true;
            return Some(Mappings::Read);
        }
        if process.generations.is_empty() {
            process.generations.push(Generation::empty());
            return Some(Mappings::Unreadable);
        }
        Some(Mappings::Remembered)
    }

    /// Processes known.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Drops processes unseen for `after` windows, and those gone: found
    /// gone at an earlier window's end and unseen in this one, or gone
    /// unseen for [`GONE_AFTER_WINDOWS`] (with the root of a container they
    /// hold open: kept `after` windows, fifty containers' short processes
    /// left the daemon a hundred descriptors); returns their pids, whose
    /// blazesym caches (of their anonymous memory) go with them.
    pub fn evict(&mut self, window: u64, after: u64) -> Vec<u32> {
        let mut pids = Vec::new();
        self.map.retain(|&pid, p| {
            let unseen = window - p.last_seen;
            let found_gone = unseen >= 1 && p.gone_since.is_some_and(|at| at < window);
            let keep = unseen < after
                && !found_gone
                && (unseen < GONE_AFTER_WINDOWS || procfs::exists(pid));
            if !keep {
                pids.push(pid);
            }
            keep
        });
        pids
    }
}

#[cfg(test)]
mod tests;

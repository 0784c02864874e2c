//! Addresses → functions, files and lines, with blazesym.
//!
//! User addresses are turned into file offsets with the process's mappings
//! (`procmaps.rs`) and symbolized per binary, so results are cached per
//! binary (keyed by build id, else path) and shared by every process that
//! maps it. Kernel addresses are symbolized through kallsyms. An address
//! that does not resolve keeps its mapping and address, with no lines.
//!
//! blazesym's `Symbolizer` is not `Send`: this type lives on one thread.
mod convert;
pub(crate) mod procmaps;

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::PathBuf,
    sync::Arc,
};

use blazesym::{
    MaybeDefault,
    symbolize::{
        Input,
        evict::{self, Evict},
        source::{Elf, Kernel, Source},
    },
};
pub(crate) use convert::map_files_path;
use convert::{binary_key, find_vma, lines_of, locations, lookup_addrs, new_mapping};
use procmaps::Vma;

use crate::{
    bpf::{RawWindow, Stack},
    procfs,
    profile::{Line, Location, Mapping},
};

/// Windows a process or binary may go unseen before its cache is dropped.
const EVICT_AFTER_WINDOWS: u64 = 10;

/// Marker frame of off-CPU time whose user stack was not captured because
/// the thread was still off the CPU when the window ended.
pub const STILL_OFF_CPU: &str = "[still off-CPU at window end]";

/// Root frame of a stack cut at the frame limit.
pub const TRUNCATED: &str = "[truncated]";

/// Pseudo file name of the kernel mapping, as perf names it.
pub const KERNEL_MAPPING: &str = "[kernel.kallsyms]";

/// Identity of a binary for the symbol cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum BinaryKey {
    BuildId(String),
    Path(String),
}

struct ProcessInfo {
    comm: Arc<str>,
    /// Executable mappings, sorted, with their pprof mapping.
    vmas: Vec<(Vma, Arc<Mapping>)>,
    last_seen: u64,
    /// Files blazesym read (and caches) for this process, evicted from its
    /// cache with the process: `/proc/<pid>/map_files/...` paths are
    /// per process, so without this the cache grows with process churn.
    blaze_paths: HashSet<PathBuf>,
}

#[derive(Default)]
struct BinaryCache {
    /// Lookup file offset → frames (empty: did not resolve).
    lines: HashMap<u64, Arc<[Line]>>,
    last_seen: u64,
}

/// Per-window symbolization accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SymbolizeStats {
    /// Distinct addresses looked up for the first time.
    pub resolved: u64,
    /// Of those, addresses with no symbol.
    pub failed: u64,
    /// Processes whose mappings could not be read (exited before the drain).
    pub processes_unreadable: u64,
}

pub struct Symbolizer {
    blaze: blazesym::symbolize::Symbolizer,
    processes: HashMap<u32, ProcessInfo>,
    binaries: HashMap<BinaryKey, BinaryCache>,
    kernel: HashMap<u64, Arc<[Line]>>,
    kernel_mapping: Arc<Mapping>,
    window: u64,
}

impl Default for Symbolizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Symbolizer {
    #[must_use]
    pub fn new() -> Self {
        let blaze = blazesym::symbolize::Symbolizer::builder()
            // Reload checks compare modification times, and procfs files
            // (kallsyms, map_files) always look modified: with it on, every
            // window re-parsed kallsyms and re-inflated debug sections.
            // Binaries are identified by build id in our own cache instead.
            .enable_auto_reload(false)
            .enable_code_info(true)
            .enable_inlined_fns(true)
            .enable_demangling(true)
            .build();
        Self {
            blaze,
            processes: HashMap::new(),
            binaries: HashMap::new(),
            kernel: HashMap::new(),
            kernel_mapping: Arc::new(Mapping {
                start: 0,
                limit: u64::MAX,
                file_offset: 0,
                file: KERNEL_MAPPING.to_owned(),
                build_id: String::new(),
            }),
            window: 0,
        }
    }

    /// Symbolizes every address of `window` that is not cached yet, so the
    /// lookups that follow are cache hits.
    pub fn prepare(&mut self, window: &RawWindow) -> SymbolizeStats {
        self.window += 1;
        let mut stats = SymbolizeStats::default();

        let mut user: BTreeMap<u32, HashSet<u64>> = BTreeMap::new();
        let mut kernel: HashSet<u64> = HashSet::new();
        for sample in &window.samples {
            if let Stack::Frames(frames) | Stack::Truncated(frames) = &sample.user_stack {
                user.entry(sample.pid)
                    .or_default()
                    .extend(lookup_addrs(frames));
            }
            if let Stack::Frames(frames) | Stack::Truncated(frames) = &sample.kernel_stack {
                kernel.extend(lookup_addrs(frames));
            }
        }
        for sample in &window.samples {
            if self
                .processes
                .get(&sample.pid)
                .is_none_or(|p| p.last_seen != self.window)
            {
                stats.processes_unreadable +=
                    u64::from(!self.refresh_process(sample.pid, &sample.thread));
            }
        }

        // Group the new user lookups by binary, remembering a path to read it from.
        let mut todo: HashMap<BinaryKey, (u32, PathBuf, Vec<u64>)> = HashMap::new();
        for (pid, addrs) in &user {
            let Some(process) = self.processes.get(pid) else {
                continue;
            };
            for &addr in addrs {
                let Some((vma, mapping)) = find_vma(&process.vmas, addr) else {
                    continue;
                };
                if !vma.is_file() {
                    continue;
                }
                let key = binary_key(mapping);
                let cache = self.binaries.entry(key.clone()).or_default();
                cache.last_seen = self.window;
                let offset = vma.file_offset(addr);
                if !cache.lines.contains_key(&offset) {
                    todo.entry(key)
                        .or_insert_with(|| (*pid, map_files_path(*pid, vma), Vec::new()))
                        .2
                        .push(offset);
                }
            }
        }
        for (key, (pid, path, offsets)) in todo {
            let resolved = self.symbolize(
                &Source::Elf(Elf::new(path.clone())),
                Input::FileOffset(&offsets),
            );
            if let Some(process) = self.processes.get_mut(&pid) {
                process.blaze_paths.insert(path);
            }
            let cache = self.binaries.entry(key).or_default();
            for (offset, lines) in offsets.into_iter().zip(resolved) {
                stats.resolved += 1;
                stats.failed += u64::from(lines.is_empty());
                cache.lines.insert(offset, lines);
            }
        }

        let kernel: Vec<u64> = kernel
            .into_iter()
            .filter(|a| !self.kernel.contains_key(a))
            .collect();
        if !kernel.is_empty() {
            let source = Source::Kernel(Kernel {
                vmlinux: MaybeDefault::None,
                ..Kernel::default()
            });
            let resolved = self.symbolize(&source, Input::AbsAddr(&kernel));
            for (addr, lines) in kernel.into_iter().zip(resolved) {
                stats.resolved += 1;
                stats.failed += u64::from(lines.is_empty());
                self.kernel.insert(addr, lines);
            }
        }

        self.evict();
        stats
    }

    /// The process name of `pid`, as read during [`Symbolizer::prepare`].
    #[must_use]
    pub fn process_name(&self, pid: u32) -> Arc<str> {
        self.processes
            .get(&pid)
            .map_or_else(|| Arc::from(""), |p| p.comm.clone())
    }

    /// The locations of a captured user stack, leaf first.
    #[must_use]
    pub fn user_locations(&self, pid: u32, stack: &Stack) -> Vec<Location> {
        let vmas = self.processes.get(&pid).map_or(&[][..], |p| &p.vmas[..]);
        locations(stack, "user", |addr, lookup| {
            let Some((vma, mapping)) = find_vma(vmas, addr) else {
                return Location {
                    mapping: None,
                    address: addr,
                    lines: Arc::new([]),
                };
            };
            let lines = self
                .binaries
                .get(&binary_key(mapping))
                .and_then(|cache| cache.lines.get(&vma.file_offset(lookup)))
                .cloned()
                .unwrap_or_else(|| Arc::new([]));
            Location {
                mapping: Some(mapping.clone()),
                address: addr,
                lines,
            }
        })
    }

    /// The locations of a captured kernel stack, leaf first.
    #[must_use]
    pub fn kernel_locations(&self, stack: &Stack) -> Vec<Location> {
        locations(stack, "kernel", |addr, lookup| Location {
            mapping: Some(self.kernel_mapping.clone()),
            address: addr,
            lines: self
                .kernel
                .get(&lookup)
                .cloned()
                .unwrap_or_else(|| Arc::new([])),
        })
    }

    /// Re-reads a process's mappings and name; keeps the last good copy when
    /// the process is gone. Returns whether the mappings were read.
    fn refresh_process(&mut self, pid: u32, thread: &str) -> bool {
        let window = self.window;
        let comm = procfs::comm(pid, pid).map(Arc::<str>::from);
        let vmas = procmaps::read(pid);
        let readable = vmas.is_ok();
        let previous = self.processes.remove(&pid);
        let vmas = match (vmas, &previous) {
            (Ok(vmas), _) => vmas
                .into_iter()
                .map(|vma| {
                    let reused = previous.as_ref().and_then(|p| {
                        p.vmas
                            .iter()
                            .find(|(old, _)| *old == vma)
                            .map(|(_, m)| m.clone())
                    });
                    let mapping = reused.unwrap_or_else(|| Arc::new(new_mapping(pid, &vma)));
                    (vma, mapping)
                })
                .collect(),
            (Err(_), Some(previous)) => previous.vmas.clone(),
            (Err(_), None) => Vec::new(),
        };
        let (previous_comm, blaze_paths) =
            previous.map_or((None, HashSet::new()), |p| (Some(p.comm), p.blaze_paths));
        let comm = comm.or(previous_comm).unwrap_or_else(|| Arc::from(thread));
        self.processes.insert(
            pid,
            ProcessInfo {
                comm,
                vmas,
                last_seen: window,
                blaze_paths,
            },
        );
        readable
    }

    fn symbolize(&self, source: &Source<'_>, input: Input<&[u64]>) -> Vec<Arc<[Line]>> {
        let count = match input {
            Input::AbsAddr(a) | Input::VirtOffset(a) | Input::FileOffset(a) => a.len(),
        };
        match self.blaze.symbolize(source, input) {
            Ok(results) => results
                .into_iter()
                .map(|result| lines_of(&result))
                .collect(),
            Err(e) => {
                tracing::debug!("symbolization failed: {e}");
                vec![Arc::from([]); count]
            }
        }
    }

    fn evict(&mut self) {
        let window = self.window;
        let mut gone = Vec::new();
        self.processes.retain(|_, p| {
            let keep = window - p.last_seen < EVICT_AFTER_WINDOWS;
            if !keep {
                gone.extend(p.blaze_paths.drain());
            }
            keep
        });
        for path in gone {
            let _ = self.blaze.evict(&Evict::Elf(evict::Elf::new(path)));
        }
        self.binaries
            .retain(|_, b| window - b.last_seen < EVICT_AFTER_WINDOWS);
    }
}

#[cfg(test)]
mod tests;

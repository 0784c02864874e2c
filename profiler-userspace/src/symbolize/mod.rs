//! Addresses → functions, files and lines, with blazesym.
//!
//! User addresses are turned into file offsets with the process's mappings
//! (`procmaps.rs`) and symbolized per binary (`binaries.rs`), so results are
//! cached per binary (keyed by build id, else path) and shared by every
//! process that maps it. Names come from the binary, a separate debug file
//! or debuginfod (`debug_files.rs`, `debuginfod.rs`). Addresses outside any
//! file (JIT code, the vDSO) go through the process's perf map
//! (`anonymous.rs`). Kernel addresses are symbolized through kallsyms. An
//! address that does not resolve keeps its mapping and address, with no
//! lines, so a reader with the binary can still symbolize it.
//!
//! blazesym's `Symbolizer` is not `Send`: this type lives on one thread.
mod anonymous;
mod binaries;
mod convert;
mod debug_files;
pub mod debuginfod;
mod processes;
pub mod procmaps;
mod recorded;

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
};

use anonymous::symbolize_anonymous;
use binaries::{Binaries, Todo};
use blazesym::{
    MaybeDefault,
    symbolize::{
        Input,
        evict::{self, Evict},
        source::{Kernel, Source},
    },
};
pub(crate) use convert::map_files_path;
use convert::{binary_key, find_vma, lines_of, locations, lookup_addrs};
pub(crate) use debug_files::hex;
pub use debuginfod::{Debuginfod, DebuginfodStats};
pub use processes::ProcessSnapshot;
use processes::{Mappings, Processes, binary_path};
pub use recorded::{MappedFile, RecordStats, RecordedImage, RecordedVma};

use crate::{
    cgroup::Placement,
    config,
    profile::{Line, Location, Mapping},
    sample::{RawSample, Stack},
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

/// Why a user frame has no name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unnamed {
    /// No mapping was known for its address (the process was never read).
    NoMapping,
    /// Its binary could not be read (gone, replaced: its build id differs,
    /// or in a namespace out of reach): the frame keeps its mapping.
    BinaryGone,
    /// The binary (or the JIT's map) was read and has no name there.
    NoSymbols,
}

impl Unnamed {
    pub const ALL: [Self; 3] = [Self::NoMapping, Self::BinaryGone, Self::NoSymbols];

    /// The counter in a profile's comments and `/metrics`.
    #[must_use]
    pub fn counter(self) -> &'static str {
        match self {
            Self::NoMapping => "user_frames_unnamed_no_mapping",
            Self::BinaryGone => "user_frames_unnamed_binary_gone",
            Self::NoSymbols => "user_frames_unnamed_no_symbols",
        }
    }
}

/// Per-window symbolization accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SymbolizeStats {
    /// Distinct addresses looked up for the first time.
    pub resolved: u64,
    /// Of those, addresses with no symbol.
    pub failed: u64,
    /// Processes whose mappings could not be read (exited before the
    /// window's end, never read while they lived).
    pub processes_unreadable: u64,
    /// Processes gone at the window's end, symbolized with the mappings
    /// read while they lived (when first seen, or at exec) or recorded.
    pub processes_remembered: u64,
    /// Images of sampled processes taken from the kernel's mmap records.
    pub images_recorded: u64,
    /// Separate debug files (local or downloaded) first used this window.
    pub debug_files: u64,
    /// Debuginfod's accounting this window, and downloads under way at its
    /// end; `None` when debuginfod is off.
    pub debuginfod: Option<(DebuginfodStats, u64)>,
}

/// The new addresses of one window, by process and image
/// (`processes.rs`), and by side.
#[derive(Default)]
struct WindowAddrs {
    user: BTreeMap<(u32, usize), HashSet<u64>>,
    kernel: HashSet<u64>,
}

pub struct Symbolizer {
    blaze: blazesym::symbolize::Symbolizer,
    processes: Processes,
    binaries: Binaries,
    kernel: HashMap<u64, Arc<[Line]>>,
    kernel_mapping: Arc<Mapping>,
    window: u64,
}

impl Default for Symbolizer {
    fn default() -> Self {
        Self::new(&config::Symbols::default(), None)
    }
}

impl Symbolizer {
    /// A symbolizer that looks for debug files as `symbols` says, with
    /// `debuginfod` (already started) for those not found locally.
    #[must_use]
    pub fn new(symbols: &config::Symbols, debuginfod: Option<Debuginfod>) -> Self {
        let blaze = blazesym::symbolize::Symbolizer::builder()
            // Reload checks compare modification times, and procfs files
            // (kallsyms, map_files) always look modified: with it on, every
            // window re-parsed kallsyms and re-inflated debug sections.
            // Binaries are identified by build id in our own cache instead.
            .enable_auto_reload(false)
            .enable_code_info(true)
            .enable_inlined_fns(true)
            .enable_demangling(true)
            .set_debug_dirs(Some(&symbols.debug_dirs))
            .build();
        Self {
            blaze,
            processes: Processes::default(),
            binaries: Binaries::new(symbols.debug_dirs.clone(), debuginfod),
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

    /// Symbolizes every address of a window's `samples` that is not cached
    /// yet, so the lookups that follow are cache hits. `processes` and
    /// `recorded` are the mappings read or recorded while processes lived.
    pub fn prepare(
        &mut self,
        samples: &[RawSample],
        processes: &[Arc<ProcessSnapshot>],
        recorded: &[Arc<RecordedImage>],
    ) -> SymbolizeStats {
        self.window += 1;
        let mut stats = SymbolizeStats::default();
        self.binaries.collect_downloads();
        self.read_processes(samples, processes, recorded, &mut stats);
        let addrs = self.window_addrs(samples);
        self.symbolize_user(&addrs.user, &mut stats);
        self.symbolize_kernel(addrs.kernel, &mut stats);
        stats.debug_files = self.binaries.take_debug_files();
        stats.debuginfod = self.binaries.take_debuginfod_stats();
        self.evict();
        stats
    }

    /// Takes in the mappings recorded or read while processes lived, then
    /// reads every process of the window's samples with user frames as it
    /// is now (of the others, only a new one's name and placement).
    /// Recorded images count only for processes with samples: most never
    /// have any.
    fn read_processes(
        &mut self,
        samples: &[RawSample],
        processes: &[Arc<ProcessSnapshot>],
        recorded: &[Arc<RecordedImage>],
        stats: &mut SymbolizeStats,
    ) {
        self.processes.start_window();
        let with_samples: HashSet<u32> = samples.iter().map(|s| s.pid).collect();
        for image in recorded.iter().filter(|i| with_samples.contains(&i.pid)) {
            self.processes.remember_recorded(image, self.window);
            stats.images_recorded += 1;
        }
        for snapshot in processes {
            self.processes.remember(snapshot, self.window);
        }
        for sample in samples {
            if stack_frames(&sample.user_stack).is_empty() {
                self.processes.know(sample.pid, &sample.thread, self.window);
                continue;
            }
            match self
                .processes
                .refresh(sample.pid, &sample.thread, self.window)
            {
                None | Some(Mappings::Read) => {}
                Some(Mappings::Remembered) => stats.processes_remembered += 1,
                Some(Mappings::Unreadable) => stats.processes_unreadable += 1,
            }
        }
    }

    /// The process name of `pid`, as read during [`Symbolizer::prepare`].
    #[must_use]
    pub fn process_name(&self, pid: u32) -> Arc<str> {
        self.processes
            .get(pid)
            .map_or_else(|| Arc::from(""), |p| p.comm.clone())
    }

    /// The cgroup, container and unit of `pid`, as read during
    /// [`Symbolizer::prepare`].
    #[must_use]
    pub fn placement(&self, pid: u32) -> Arc<Placement> {
        self.processes
            .get(pid)
            .map_or_else(Arc::default, |p| p.placement.clone())
    }

    /// The locations of a captured user stack, leaf first.
    #[must_use]
    pub fn user_locations(&self, pid: u32, stack: &Stack) -> Vec<Location> {
        let process = self.processes.get(pid);
        let vmas = process.map_or(&[][..], |p| {
            &p.generation(p.generation_of(stack_frames(stack))).vmas[..]
        });
        locations(stack, "user", |addr, lookup| {
            let Some((vma, mapping)) = find_vma(vmas, addr) else {
                return Location {
                    mapping: None,
                    address: addr,
                    lines: Arc::new([]),
                };
            };
            let lines = if vma.is_file() {
                self.binaries
                    .lines(&binary_key(mapping), vma.file_offset(lookup))
            } else {
                process.and_then(|p| p.anonymous.lines.get(&lookup))
            };
            Location {
                mapping: Some(mapping.clone()),
                address: addr,
                lines: lines.cloned().unwrap_or_else(|| Arc::new([])),
            }
        })
    }

    /// Why `location`, a user frame that did not resolve, has no name.
    #[must_use]
    pub fn unnamed(&self, location: &Location) -> Unnamed {
        match &location.mapping {
            None => Unnamed::NoMapping,
            Some(m) if !m.file.starts_with('/') => Unnamed::NoSymbols,
            Some(m) if self.binaries.was_read(&binary_key(m)) => Unnamed::NoSymbols,
            Some(_) => Unnamed::BinaryGone,
        }
    }

    /// The locations of a captured kernel stack, leaf first. All are in
    /// the kernel mapping, markers too (a lost stack, names read from
    /// `/proc`), so a reader tells the kernel part from the user part.
    #[must_use]
    pub fn kernel_locations(&self, stack: &Stack) -> Vec<Location> {
        let mut kernel = locations(stack, "kernel", |addr, lookup| Location {
            mapping: None,
            address: addr,
            lines: self
                .kernel
                .get(&lookup)
                .cloned()
                .unwrap_or_else(|| Arc::new([])),
        });
        for location in &mut kernel {
            location.mapping = Some(self.kernel_mapping.clone());
        }
        kernel
    }

    /// Looks up the user addresses not cached yet: file-backed ones per
    /// binary, the rest per process.
    fn symbolize_user(
        &mut self,
        user: &BTreeMap<(u32, usize), HashSet<u64>>,
        stats: &mut SymbolizeStats,
    ) {
        let mut todo: HashMap<BinaryKey, Todo> = HashMap::new();
        // Binaries that cannot be read any more, by build id.
        let mut gone: HashMap<BinaryKey, Vec<(u64, u64)>> = HashMap::new();
        let mut anonymous: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        let mut read_paths = Vec::new();
        for (&(pid, index), addrs) in user {
            let Some(process) = self.processes.get(pid) else {
                continue;
            };
            let generation = process.generation(index);
            for &addr in addrs {
                let Some((vma, mapping)) = find_vma(&generation.vmas, addr) else {
                    continue;
                };
                if !vma.is_file() {
                    anonymous.entry(pid).or_default().push(addr);
                    continue;
                }
                let key = binary_key(mapping);
                let offset = vma.file_offset(addr);
                if !self.binaries.needs(&key, offset, self.window) {
                    continue;
                }
                if let Some(todo) = todo.get_mut(&key) {
                    todo.offsets.push(offset);
                    continue;
                }
                let current = process.is_current(index);
                // Unreadable now (gone, in another namespace, replaced):
                // only a debug file found by build id can name it; else
                // the address keeps its mapping, for a reader with the file.
                let Some((path, dir)) = binary_path(pid, vma, mapping, generation, current) else {
                    if !mapping.build_id.is_empty() {
                        gone.entry(key).or_default().push((offset, vma.offset));
                    }
                    continue;
                };
                read_paths.push((pid, path.clone()));
                todo.insert(
                    key,
                    Todo {
                        path,
                        dir,
                        offsets: vec![offset],
                    },
                );
            }
        }
        for (pid, path) in read_paths {
            if let Some(process) = self.processes.get_mut(pid) {
                process.blaze_paths.insert(path);
            }
        }
        for (key, mut offsets) in gone {
            if let Some(readable) = todo.get_mut(&key) {
                readable.offsets.extend(offsets.iter().map(|&(o, _)| o));
                continue;
            }
            offsets.sort_unstable();
            offsets.dedup_by_key(|&mut (o, _)| o);
            let (looked_up, failed) = self.binaries.symbolize_gone(&self.blaze, key, &offsets);
            stats.resolved += looked_up;
            stats.failed += failed;
        }
        for (key, todo) in todo {
            let (looked_up, failed) = self.binaries.symbolize(&self.blaze, key, &todo);
            stats.resolved += looked_up;
            stats.failed += failed;
        }
        for (pid, addrs) in anonymous {
            let Some(process) = self.processes.get_mut(pid) else {
                continue;
            };
            let (looked_up, failed) =
                symbolize_anonymous(&mut self.blaze, pid, &mut process.anonymous, &addrs);
            stats.resolved += looked_up;
            stats.failed += failed;
        }
    }

    /// Looks up the kernel addresses not cached yet, through kallsyms.
    fn symbolize_kernel(&mut self, kernel: HashSet<u64>, stats: &mut SymbolizeStats) {
        let kernel: Vec<u64> = kernel
            .into_iter()
            .filter(|a| !self.kernel.contains_key(a))
            .collect();
        if kernel.is_empty() {
            return;
        }
        let source = Source::Kernel(Kernel {
            vmlinux: MaybeDefault::None,
            ..Kernel::default()
        });
        let resolved = symbolize(&self.blaze, &source, Input::AbsAddr(&kernel));
        for (addr, lines) in kernel.into_iter().zip(resolved) {
            stats.resolved += 1;
            stats.failed += u64::from(lines.is_empty());
            self.kernel.insert(addr, lines);
        }
    }

    fn evict(&mut self) {
        let (paths, pids) = self.processes.evict(self.window, EVICT_AFTER_WINDOWS);
        for path in paths {
            let _ = self.blaze.evict(&Evict::Elf(evict::Elf::new(path)));
        }
        for pid in pids {
            let _ = self
                .blaze
                .evict(&Evict::Process(evict::Process::new(pid.into())));
        }
        self.binaries.evict(self.window, EVICT_AFTER_WINDOWS);
    }

    /// The addresses to look up in `window`, deduplicated, user ones by
    /// the process image their stack belongs to.
    fn window_addrs(&self, samples: &[RawSample]) -> WindowAddrs {
        let mut addrs = WindowAddrs::default();
        for sample in samples {
            let frames = stack_frames(&sample.user_stack);
            if !frames.is_empty() {
                let index = self
                    .processes
                    .get(sample.pid)
                    .map_or(0, |p| p.generation_of(frames));
                addrs
                    .user
                    .entry((sample.pid, index))
                    .or_default()
                    .extend(lookup_addrs(frames));
            }
            addrs
                .kernel
                .extend(lookup_addrs(stack_frames(&sample.kernel_stack)));
        }
        addrs
    }
}

/// The captured addresses of `stack`, leaf first (none for markers).
fn stack_frames(stack: &Stack) -> &[u64] {
    match stack {
        Stack::Frames(frames) | Stack::Truncated(frames) => frames,
        _ => &[],
    }
}

/// Symbolizes `input` in `source`: one entry per address, empty where it
/// did not resolve (or the whole source failed).
fn symbolize(
    blaze: &blazesym::symbolize::Symbolizer,
    source: &Source<'_>,
    input: Input<&[u64]>,
) -> Vec<Arc<[Line]>> {
    let count = match input {
        Input::AbsAddr(a) | Input::VirtOffset(a) | Input::FileOffset(a) => a.len(),
    };
    match blaze.symbolize(source, input) {
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

#[cfg(test)]
mod tests;

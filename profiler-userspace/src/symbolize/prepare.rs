//! The window's side of the symbolizer: which processes and addresses
//! it brings, read and looked up once (`Symbolizer::prepare`), so that
//! the lookups that build the profile (`mod.rs`) are cache hits.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
};

use blazesym::symbolize::evict::{self, Evict};

use super::{
    SymbolizeStats, Symbolizer,
    anonymous::symbolize_anonymous,
    binaries::Todo,
    convert::{BinaryKey, binary_key, find_vma, lookup_addrs, native_lookups, user_frames},
    kallsyms::Kallsyms,
    kernel_symbols::KernelSymbols,
    processes::{Mappings, binary_path},
    stack_frames,
};
use profiler_common::frames::UserFrame;

use crate::{
    process::{recorded::RecordedImage, snapshot::ProcessSnapshot},
    sample::{KernelSymbol, RawSample},
};

/// Windows a process or binary may go unseen before its cache is dropped.
pub(super) const EVICT_AFTER_WINDOWS: u64 = 10;

/// Kernel addresses cached at most: past it, only those of the window
/// being symbolized stay (kernel code is bounded, but BPF programs and
/// modules come and go at new addresses for weeks).
pub(super) const MAX_KERNEL_ADDRESSES: usize = 65_536;

/// The new addresses of one window, by process and image
/// (`processes.rs`), and by side.
#[derive(Default)]
struct WindowAddrs {
    user: BTreeMap<(u32, usize), HashSet<u64>>,
    kernel: HashSet<u64>,
}

impl Symbolizer {
    /// Symbolizes every address of a window's `samples` that is not cached
    /// yet, so the lookups that follow are cache hits (`samples` is walked
    /// more than once, so it is cheap to clone: a slice's iterator, or
    /// one chained to the wakers' rows). `processes` and
    /// `recorded` are the mappings read or recorded while processes lived,
    /// `kernel_symbols` the kernel code loaded meanwhile.
    pub fn prepare<'a>(
        &mut self,
        samples: impl Iterator<Item = &'a RawSample> + Clone,
        processes: &[Arc<ProcessSnapshot>],
        recorded: &[Arc<RecordedImage>],
        kernel_symbols: &[KernelSymbol],
    ) -> SymbolizeStats {
        self.window += 1;
        let mut stats = SymbolizeStats::default();
        self.binaries.collect_downloads();
        self.read_processes(samples.clone(), processes, recorded, &mut stats);
        stats.roots_unheld = self.processes.take_unheld();
        stats.contexts = self.processes.take_contexts();
        self.take_kernel_symbols(kernel_symbols);
        let addrs = self.window_addrs(samples.clone());
        self.prepare_python(samples);
        self.symbolize_user(&addrs.user, &mut stats);
        self.symbolize_kernel(addrs.kernel, &mut stats);
        stats.debug_files = self.binaries.take_debug_files();
        stats.debuginfod = self.binaries.take_debuginfod_stats();
        stats.caches.binaries_evicted = self.evict();
        stats.caches.binaries = self.binaries.len() as u64;
        stats.caches.processes = self.processes.len() as u64;
        stats.caches.kernel_addresses = self.kernel.len() as u64;
        stats
    }

    /// Takes in the mappings recorded or read while processes lived, then
    /// reads every process of the window's samples with user frames as it
    /// is now (of the others, only a new one's name and placement).
    /// Recorded images count only for processes with samples: most never
    /// have any.
    fn read_processes<'a>(
        &mut self,
        samples: impl Iterator<Item = &'a RawSample> + Clone,
        processes: &[Arc<ProcessSnapshot>],
        recorded: &[Arc<RecordedImage>],
        stats: &mut SymbolizeStats,
    ) {
        self.processes.start_window();
        let with_samples: HashSet<u32> = samples.clone().map(|s| s.pid).collect();
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
        for (key, mut offsets) in gone {
            if let Some(readable) = todo.get_mut(&key) {
                readable.offsets.extend(offsets.iter().map(|&(o, _)| o));
                continue;
            }
            offsets.sort_unstable();
            offsets.dedup_by_key(|&mut (o, _)| o);
            let (looked_up, failed) =
                self.binaries
                    .symbolize_gone(&mut self.blaze, key, &offsets, self.window);
            stats.resolved += looked_up;
            stats.failed += failed;
        }
        for (key, todo) in todo {
            let (looked_up, failed) =
                self.binaries
                    .symbolize(&mut self.blaze, key, &todo, self.window);
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

    /// Takes in the kernel code loaded since the last window, and forgets
    /// the names cached in its ranges.
    fn take_kernel_symbols(&mut self, kernel_symbols: &[KernelSymbol]) {
        let new = self.dynamic.apply(kernel_symbols);
        if !new.is_empty() {
            self.kernel
                .retain(|&addr, _| !KernelSymbols::touches(new, addr));
        }
    }

    /// Looks up the kernel addresses not cached yet: in code loaded since
    /// kallsyms was read, by the kernel's records, else through kallsyms
    /// (read at the first).
    fn symbolize_kernel(&mut self, kernel: HashSet<u64>, stats: &mut SymbolizeStats) {
        if self.kernel.len() > MAX_KERNEL_ADDRESSES {
            let before = self.kernel.len();
            self.kernel.retain(|addr, _| kernel.contains(addr));
            stats.caches.kernel_addresses_evicted = (before - self.kernel.len()) as u64;
        }
        let mut kernel: Vec<u64> = kernel
            .into_iter()
            .filter(|a| !self.kernel.contains_key(a))
            .collect();
        kernel.retain(|&addr| match self.dynamic.lines(addr) {
            Some(lines) => {
                stats.resolved += 1;
                stats.failed += u64::from(lines.is_empty());
                self.kernel.insert(addr, lines);
                false
            }
            None => true,
        });
        if kernel.is_empty() {
            return;
        }
        let kallsyms = self.kallsyms.get_or_insert_with(|| match Kallsyms::read() {
            Ok(read) if read.len() > 0 => read,
            Ok(_) => {
                tracing::warn!(
                    "kernel frames stay unnamed: /proc/kallsyms shows no addresses (kernel.kptr_restrict, or no CAP_SYSLOG)"
                );
                Kallsyms::default()
            }
            Err(e) => {
                tracing::warn!("kernel frames stay unnamed: reading /proc/kallsyms: {e}");
                Kallsyms::default()
            }
        });
        let resolved = kallsyms.lines(&kernel);
        for (addr, lines) in kernel.into_iter().zip(resolved) {
            stats.resolved += 1;
            stats.failed += u64::from(lines.is_empty());
            self.kernel.insert(addr, lines);
        }
    }

    /// Drops the processes and binaries unseen for a while, and binaries
    /// past their bound; returns how many the bound dropped.
    fn evict(&mut self) -> u64 {
        let gone = self.processes.evict(self.window, EVICT_AFTER_WINDOWS);
        for &pid in &gone {
            let _ = self
                .blaze
                .evict(&Evict::Process(evict::Process::new(pid.into())));
        }
        self.python.evict(&gone);
        self.java.evict(&gone);
        self.binaries
            .end_window(&mut self.blaze, self.window, EVICT_AFTER_WINDOWS)
    }

    /// Makes the lines of the window's Python frames.
    fn prepare_python<'a>(&mut self, samples: impl Iterator<Item = &'a RawSample>) {
        for sample in samples {
            for (frame, _) in user_frames(stack_frames(&sample.user_stack)) {
                if let UserFrame::Python {
                    code,
                    instr,
                    first_line,
                } = frame
                {
                    self.python.prepare(sample.pid, code, instr, first_line);
                }
            }
        }
    }

    /// The addresses to look up in `window`, deduplicated, user ones by
    /// the process image their stack belongs to.
    fn window_addrs<'a>(&self, samples: impl Iterator<Item = &'a RawSample>) -> WindowAddrs {
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
                    .extend(native_lookups(frames));
            }
            addrs
                .kernel
                .extend(lookup_addrs(stack_frames(&sample.kernel_stack)));
        }
        addrs
    }
}

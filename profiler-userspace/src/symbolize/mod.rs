//! Addresses → functions, files and lines, with blazesym.
//!
//! User addresses are turned into file offsets with the process's mappings
//! (`process/maps.rs`) and symbolized per binary (`binaries.rs`), so
//! results are cached per binary (keyed by build id, else digest, else
//! path and file) and shared by every process that maps it. Names come from the binary, a separate debug file
//! or debuginfod (`debug_files.rs`, `debuginfod.rs`); a debug file with
//! compressed sections is read through a plain copy (`inflated.rs`).
//! Addresses outside any file (JIT code, the vDSO) go through the
//! process's perf map (`anonymous.rs`). Kernel addresses are symbolized
//! through kallsyms (`kallsyms.rs`), except those in code the kernel's
//! records say was loaded since (`kernel_symbols.rs`: BPF programs). An address that does not resolve
//! keeps its mapping and address, with no lines, so a reader with the
//! binary can still symbolize it.
//!
//! Each window is looked up in two steps: `prepare.rs` reads the window's
//! processes and looks up its new addresses once; the lookups here then
//! build the profile's locations from the caches.
//!
//! blazesym's `Symbolizer` is not `Send`: this type lives on one thread.
mod anonymous;
mod binaries;
mod convert;
mod debug_files;
pub mod debuginfod;
mod inflated;
mod java;
mod kallsyms;
mod kernel_symbols;
mod parsed;
mod perf_map;
mod plt;
mod prepare;
mod processes;
mod python;
mod resident;
mod resource;

use std::{collections::HashMap, sync::Arc};

use binaries::Binaries;

pub use convert::KERNEL_MAPPING;
use convert::{binary_key, find_vma, locations, lookup_addrs, user_frames};
pub use debuginfod::{Debuginfod, DebuginfodStats};
use processes::Processes;
use profiler_common::frames::UserFrame;
pub use resource::{Context, ContextCounts};

use crate::{
    config,
    process::cgroup::Placement,
    profile::{Line, Location, Mapping},
    runtimes::{java::NamedFrame, python::PythonCode},
    sample::Stack,
};

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
    /// Roots of processes in other mount namespaces (or chrooted) that
    /// could not be held open, by cause (`Unheld::index`).
    pub roots_unheld: [u64; 3],
    /// OpenTelemetry process contexts read, and found but not readable.
    pub contexts: ContextCounts,
    /// Separate debug files (local or downloaded) first used this window.
    pub debug_files: u64,
    /// Debuginfod's accounting this window, and downloads under way at its
    /// end; `None` when debuginfod is off.
    pub debuginfod: Option<(DebuginfodStats, u64)>,
    /// The caches' sizes at the window's end, and what their bounds
    /// dropped this window.
    pub caches: CacheLevels,
}

/// The symbolizer's caches: entries at a window's end, and entries their
/// size bounds dropped in it (the others go when unseen for a while).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheLevels {
    pub binaries: u64,
    pub binaries_evicted: u64,
    pub processes: u64,
    pub kernel_addresses: u64,
    pub kernel_addresses_evicted: u64,
}

pub struct Symbolizer {
    blaze: blazesym::symbolize::Symbolizer,
    processes: Processes,
    binaries: Binaries,
    /// Read at the first kernel address to name.
    kallsyms: Option<kallsyms::Kallsyms>,
    /// Kernel code loaded since, as the kernel's records told.
    dynamic: kernel_symbols::KernelSymbols,
    kernel: HashMap<u64, Arc<[Line]>>,
    kernel_mapping: Arc<Mapping>,
    /// Python frames' names.
    python: python::PythonNames,
    java: java::JavaNames,
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
            binaries: Binaries::new(
                symbols.debug_dirs.clone(),
                debuginfod,
                symbols.debug_cache.clone(),
            ),
            kallsyms: None,
            dynamic: kernel_symbols::KernelSymbols::default(),
            kernel: HashMap::new(),
            kernel_mapping: Arc::new(Mapping {
                start: 0,
                limit: u64::MAX,
                file_offset: 0,
                file: Arc::from(KERNEL_MAPPING),
                build_id: Arc::default(),
                digest: None,
                file_id: None,
            }),
            python: python::PythonNames::default(),
            java: java::JavaNames::default(),
            window: 0,
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

    /// What `pid`'s OpenTelemetry SDK published in its process context:
    /// its resource, as labels, and its thread attributes' names
    /// (`resource.rs`).
    #[must_use]
    pub fn context(&self, pid: u32) -> Option<Arc<Context>> {
        self.processes.get(pid)?.context.clone()
    }

    /// Keeps the Python code objects read while their processes ran.
    pub fn remember_python(&mut self, codes: &[Arc<PythonCode>]) {
        self.python.remember(codes);
    }

    /// Keeps the Java frames named while their JVMs ran.
    pub fn remember_java(&mut self, names: &[Arc<NamedFrame>]) {
        self.java.remember(names);
    }

    /// The locations of a captured user stack, leaf first.
    #[must_use]
    pub fn user_locations(&self, pid: u32, stack: &Stack) -> Vec<Location> {
        let process = self.processes.get(pid);
        let vmas = process.map_or(&[][..], |p| {
            &p.generation(p.generation_of(stack_frames(stack))).vmas[..]
        });
        let native = |addr, lookup| {
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
        };
        locations(stack, "user", |frames| {
            user_frames(frames)
                .map(|(frame, lookup)| match frame {
                    UserFrame::Native(addr) => native(addr, lookup),
                    UserFrame::Python {
                        code,
                        instr,
                        first_line,
                    } => self.python.location(pid, code, instr, first_line),
                    UserFrame::PythonTorn => Location::marker(convert::TRUNCATED.to_owned()),
                    UserFrame::JavaCompiled { .. } | UserFrame::JavaInterpreted { .. } => {
                        self.java.location(pid, frame)
                    }
                })
                .collect()
        })
    }

    /// Whether the compiled Java frames of `stack` are named from a debug
    /// point other than their own (`CompiledFrames::approximate`): `None`
    /// for a stack without a named compiled Java frame.
    #[must_use]
    pub fn java_approximate(&self, pid: u32, stack: &Stack) -> Option<bool> {
        self.java.approximate(
            pid,
            user_frames(stack_frames(stack)).map(|(frame, _)| frame),
        )
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
        let mut kernel = locations(stack, "kernel", |frames| {
            frames
                .iter()
                .zip(lookup_addrs(frames))
                .map(|(&addr, lookup)| Location {
                    mapping: None,
                    address: addr,
                    lines: self
                        .kernel
                        .get(&lookup)
                        .cloned()
                        .unwrap_or_else(|| Arc::new([])),
                })
                .collect()
        });
        for location in &mut kernel {
            location.mapping = Some(self.kernel_mapping.clone());
        }
        kernel
    }
}

/// The captured addresses of `stack`, leaf first (none for markers).
fn stack_frames(stack: &Stack) -> &[u64] {
    match stack {
        Stack::Frames(frames) | Stack::Truncated(frames) => frames,
        _ => &[],
    }
}

#[cfg(test)]
mod tests;

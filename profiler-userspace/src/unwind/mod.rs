//! Userspace half of the unwinder: builds each binary's unwind table once
//! (`table.rs`), places it in the kernel's row array (`store.rs`), and keeps
//! every profiled process's executable mappings current in the kernel,
//! pointing at those tables. The kernel half is `profiler-ebpf/src/unwind.rs`.
//!
//! Processes are published when the kernel walker asks (a process it has
//! no mappings for, or a PC outside them: a new process, exec, mmap,
//! dlopen) and at start for `--pid` targets. With `--unwind frame-pointer`
//! the same requests are served without tables: the mappings read are
//! still what the symbolizer needs of processes gone by the window's end. Tables are shared by every
//! process that maps the same file (same device, inode, size and mtime),
//! kept while unused until their space is needed, and built at most once;
//! a file with a GNU build id shares its table with every copy of it (a
//! container image's libc, seen through each new overlay mount, is one
//! table, not one per container), and one without, with every copy of the
//! same digest (`binary.rs`).
mod binary;
mod by_file;
mod placing;
mod publishing;
mod serving;
mod stats;
mod store;
pub mod table;
mod waiting;

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use profiler_common::{
    process::ProcessSeen,
    unwind::by_file::{FileKey, FileTable},
};

use crate::{
    bpf::UnwindMaps,
    process::{
        build_ids::{BuildIds, FileIds},
        maps::{FileStamp, Vma},
        stamps::Stamps,
    },
};
use binary::{BinaryId, identified, read_binary};
pub use publishing::Reading;
pub use serving::{Fresh, OnRead, Served};
pub use stats::UnwindStats;
use store::RowSpace;
use table::ElfUnwindInfo;
use waiting::Waiting;

struct Binary {
    /// Where its code is (its rows are in the kernel's array, not here).
    info: ElfUnwindInfo,
    /// Its table's size as its mappings give it ([`UnwindMapping::table`]).
    table: u32,
    /// Entries of its run in the kernel's array: rows and index.
    run: u32,
    /// First row in the kernel's array, when the table is there.
    first_row: Option<u32>,
    /// The files published with its table ([`by_file`]), each as last
    /// written.
    files: Vec<(FileKey, FileTable)>,
    /// Whether every runtime read it and found none of its own: its
    /// files' new processes may wait (`waiting.rs`).
    plain: bool,
    /// Processes mapping it now.
    users: u32,
    last_used: Instant,
}

struct Process {
    /// The executable mappings published, to skip unchanged ones (a heap
    /// or thread stack that grew changes nothing here).
    vmas: Vec<Vma>,
    /// The binary behind each of `vmas`, as many as were published.
    ids: Vec<Option<BinaryId>>,
    binaries: HashSet<BinaryId>,
    /// What the kernel saw of it when it last asked (all unknown for a
    /// process published unasked).
    seen: ProcessSeen,
}

/// A process's executable mappings as read, each with its file's stamp
/// (none for anonymous memory and the vDSO).
pub type Stamped<'a> = [(&'a Vma, Option<FileStamp>)];

/// A mapping as read, with its file's stamp and, where the unwinder looked
/// them up, the file's build id or digest.
pub type Identified<'a> = (&'a Vma, Option<FileStamp>, Option<FileIds>);

/// What [`Unwinder::publish`] did with a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Published {
    /// Its mappings were read anew (first seen, or changed) and published.
    Anew,
    /// Its mappings are those already published.
    Unchanged,
    /// It is gone (its mappings cannot be read).
    Gone,
}

/// What is told of the processes the kernel asks about.
type Notice = Box<dyn FnMut(&[u32]) + Send>;

/// A binary's table as built from its file, before it is placed.
struct Built {
    /// `None` when the file could not be read through the mapping.
    info: Option<ElfUnwindInfo>,
    took: Duration,
}

impl Built {
    /// Nothing built.
    fn none() -> Self {
        Self {
            info: None,
            took: Duration::ZERO,
        }
    }

    /// Reads the binary behind `vma` and builds its table; on any thread.
    fn read(pid: u32, vma: &Vma, id: &BinaryId) -> Self {
        let started = Instant::now();
        let info = read_binary(pid, vma, id).map(|data| table::build(&data).unwrap_or_default());
        Self {
            info,
            took: started.elapsed(),
        }
    }
}

pub struct Unwinder {
    /// Whether tables are built (else mappings are published bare).
    tables: bool,
    space: RowSpace,
    binaries: HashMap<BinaryId, Binary>,
    /// Build ids of the files mapped, read once per file as stamped.
    build_ids: BuildIds,
    stamps: Stamps,
    processes: HashMap<u32, Process>,
    /// Told of the processes the kernel asks about, before any of their
    /// tables is built (a large binary's takes most of a second).
    on_requests: Option<Notice>,
    /// How long a batch of requests builds and publishes before it takes
    /// the requests made meanwhile (`serving/batch.rs`).
    intake_every: Duration,
    waiting: Waiting,
    stats: UnwindStats,
}

impl Unwinder {
    /// An unwinder whose tables may use `rows` rows of the kernel's array.
    #[must_use]
    pub fn new(rows: u32) -> Self {
        Self {
            tables: true,
            space: RowSpace::new(rows),
            binaries: HashMap::new(),
            build_ids: BuildIds::default(),
            stamps: Stamps::default(),
            processes: HashMap::new(),
            on_requests: None,
            intake_every: serving::INTAKE_EVERY,
            waiting: Waiting::new(false),
            stats: UnwindStats::default(),
        }
    }

    /// An unwinder that serves the kernel's requests for mappings but
    /// builds no tables (`--unwind frame-pointer`).
    #[must_use]
    pub fn without_tables() -> Self {
        Self {
            tables: false,
            ..Self::new(0)
        }
    }

    /// Calls `notice` with the processes the kernel asks about (new,
    /// exec'd, mapped more) as soon as their requests are read, before
    /// they are served (and for those that wait, once due).
    pub fn on_requests(&mut self, notice: impl FnMut(&[u32]) + Send + 'static) {
        self.on_requests = Some(Box::new(notice));
    }

    /// Lets the requests of processes whose frames all had tables wait
    /// (`waiting.rs`): for targets whose images the mmap records keep.
    pub fn let_requests_wait(&mut self) {
        self.waiting = Waiting::new(true);
    }

    /// Whether it builds tables.
    #[must_use]
    pub fn builds_tables(&self) -> bool {
        self.tables
    }

    /// What the kernel saw of `pid` when it asked for the mappings last
    /// published (all unknown when it did not ask).
    #[must_use]
    pub fn seen(&self, pid: u32) -> ProcessSeen {
        self.processes.get(&pid).map(|p| p.seen).unwrap_or_default()
    }

    /// `pid`'s executable mappings as last published, each with the stamp
    /// of the file behind it then (none for anonymous memory, the vDSO
    /// and mappings past the kernel's limit) and its ids where they were
    /// looked up.
    #[must_use]
    pub fn identified_mappings(&self, pid: u32) -> Option<impl Iterator<Item = Identified<'_>>> {
        let process = self.processes.get(&pid)?;
        Some(identified(&process.vmas, &process.ids, self.tables))
    }

    #[must_use]
    pub fn stats(&self) -> UnwindStats {
        UnwindStats {
            rows_in_use: u64::from(self.space.used()),
            ..self.stats
        }
    }

    /// Binaries known (with a table or without).
    #[must_use]
    pub fn binaries_cached(&self) -> usize {
        self.binaries.len()
    }

    /// Processes whose mappings are published.
    #[must_use]
    pub fn processes_cached(&self) -> usize {
        self.processes.len()
    }

    /// The (first row, packed size, bias) of `vma`'s table, building and placing
    /// the table the first time its binary is seen.
    fn table_for<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        pid: u32,
        vma: &Vma,
        id: &BinaryId,
    ) -> Result<Option<(u32, u32, u64)>, M::Error> {
        if !self.tables {
            return Ok(None);
        }
        if !self.binaries.contains_key(id) {
            self.add_binary(maps, pid, vma, id)?;
        }
        Ok(self.placed_table(vma, id))
    }

    /// Builds the table of a binary seen for the first time and places it in
    /// the kernel's array. A binary that cannot be read through this
    /// mapping is not kept: the mapping was gone when its file was opened
    /// (the process exec'd or unmapped it since its maps were read), and
    /// the next process mapping the file builds the table. Kept as a binary
    /// without table, libc once stayed without one for the daemon's life
    /// after a worker exec'd while its process was read.
    fn add_binary<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        pid: u32,
        vma: &Vma,
        id: &BinaryId,
    ) -> Result<(), M::Error> {
        self.keep_built(maps, id, Built::read(pid, vma, id))
    }

    /// Places a table [`Built`] in the kernel's array and keeps its binary
    /// ([`Unwinder::add_binary`]).
    fn keep_built<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        id: &BinaryId,
        built: Built,
    ) -> Result<(), M::Error> {
        let Some(mut info) = built.info else {
            self.stats.binaries_unreadable += 1;
            return Ok(());
        };
        self.stats.tables_built += 1;
        self.stats.table_build_time += built.took;
        if info.table.rows.is_empty() {
            self.stats.binaries_without_table += 1;
        }
        let (table, run) = info.table.kernel_run();
        let first_row = self.place(maps, &run)?;
        // The rows live in the kernel's array from here on (a table that did
        // not fit is not tried again): keep only their number.
        info.table.rows = Vec::new();
        self.binaries.insert(
            id.clone(),
            Binary {
                info,
                table,
                run: u32::try_from(run.len()).unwrap_or(0),
                first_row,
                files: Vec::new(),
                plain: false,
                users: 0,
                last_used: Instant::now(),
            },
        );
        Ok(())
    }

    /// The (first row, packed size, bias) of `vma`'s table, when its
    /// binary's table is in the kernel's array.
    fn placed_table(&mut self, vma: &Vma, id: &BinaryId) -> Option<(u32, u32, u64)> {
        let binary = self.binaries.get_mut(id)?;
        binary.last_used = Instant::now();
        let first_row = binary.first_row?;
        let table = binary.table;
        // The ELF address at the mapping's start (the vDSO image is mapped
        // from its offset 0 like a file).
        let vaddr = binary.info.vaddr_of_offset(vma.offset)?;
        let bias = vma
            .start
            .wrapping_sub(vaddr)
            .wrapping_add(binary.info.table.base);
        (table != 0).then_some((first_row, table, bias))
    }

    fn forget<M: UnwindMaps>(&mut self, maps: &mut M, pid: u32) -> Result<(), M::Error> {
        maps.remove_mappings(pid)?;
        let old = self.processes.remove(&pid);
        self.release(old);
        Ok(())
    }

    fn release(&mut self, process: Option<Process>) {
        for id in process.into_iter().flat_map(|p| p.binaries) {
            if let Some(binary) = self.binaries.get_mut(&id) {
                binary.users = binary.users.saturating_sub(1);
            }
        }
    }
}

#[cfg(test)]
mod tests;

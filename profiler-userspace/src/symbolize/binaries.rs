//! The per-binary symbol cache, and where each binary's names come from
//! (`debug_files.rs`, `debuginfod.rs`, and `gopclntab` for stripped Go
//! binaries).
//!
//! Binaries are keyed by build id, else digest, else path and file (device
//! and inode as mapped: another file at the path is another binary), so
//! every process that maps a binary shares its results. A binary whose only names are
//! `.dynsym` while debuginfod looks for its debug file is symbolized
//! again, from scratch, once the file arrives.
use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use blazesym::symbolize::{Input, Symbolizer, source::Elf};

use super::{
    convert::{BinaryKey, go_lines},
    debug_files::{self, ElfFacts},
    debuginfod::{DebugFile, Debuginfod, DebuginfodStats},
    inflated::Inflated,
    parsed::ParsedFiles,
    plt::PltStubs,
};
use crate::{config::DebugCache, gopclntab::GoTable, process::files::hex, profile::Line};
use profiler_common::bound::least_recent;
use rustc_hash::FxHashMap;

/// Binaries cached at most: past it, those seen least recently are
/// dropped first (a build host maps new binaries all day, most of them run
/// once), never those of the window being symbolized (its lookups
/// follow).
pub(super) const MAX_BINARIES: usize = 1_024;

/// Where one binary's names are read from.
#[derive(Clone)]
enum Names {
    /// The binary's own `.symtab` (and DWARF, if it has any).
    Own,
    /// A separate debug file, looked up by virtual address.
    DebugFile { path: PathBuf, facts: ElfFacts },
    /// The debug file of a binary that cannot be read any more (found by
    /// build id), by virtual address: a file offset of the code mapped at
    /// file offset `pgoff` is at `offset - pgoff` past the page of
    /// `text_vaddr`, the code segment's address in the debug file.
    DebugOnly { path: PathBuf, text_vaddr: u64 },
    /// A stripped Go binary's `.gopclntab`, by virtual address.
    Go {
        table: Arc<GoTable>,
        facts: ElfFacts,
    },
    /// `.dynsym` only: exported functions.
    Dynsym,
}

#[derive(Default)]
struct BinaryCache {
    /// Decided at the binary's first lookup; `None` again when debuginfod
    /// delivers its debug file.
    names: Option<Names>,
    /// Lookup file offset → frames (empty: did not resolve).
    lines: FxHashMap<u64, Arc<[Line]>>,
    /// Read with `names`, from the binary itself.
    plt: Arc<PltStubs>,
    last_seen: u64,
}

/// One binary to symbolize: its cache key, a path to read it through, the
/// directory it was mapped from (for debug links), and new file offsets.
pub(super) struct Todo {
    pub path: PathBuf,
    pub dir: Option<PathBuf>,
    pub offsets: Vec<u64>,
}

pub(super) struct Binaries {
    /// Boxed: the table's buckets at its bound are a pointer each, not
    /// a whole cache's fields.
    caches: FxHashMap<BinaryKey, Box<BinaryCache>>,
    debug_dirs: Vec<PathBuf>,
    debuginfod: Option<Debuginfod>,
    /// Separate debug files used since the last [`Binaries::take_debug_files`].
    debug_files_used: u64,
    parsed: ParsedFiles,
    /// Plain copies of debug files with compressed sections; `None`: off.
    inflated: Option<Inflated>,
}

impl Binaries {
    pub fn new(
        debug_dirs: Vec<PathBuf>,
        debuginfod: Option<Debuginfod>,
        debug_cache: Option<DebugCache>,
    ) -> Self {
        Self {
            caches: FxHashMap::default(),
            debug_dirs,
            debuginfod,
            debug_files_used: 0,
            parsed: ParsedFiles::default(),
            inflated: debug_cache.map(Inflated::new),
        }
    }

    /// Whether the binary `key` was read (its names source decided).
    pub fn was_read(&self, key: &BinaryKey) -> bool {
        self.caches.get(key).is_some_and(|c| c.names.is_some())
    }

    /// Marks `key` seen in `window`; whether `offset` still needs a lookup.
    pub fn needs(&mut self, key: &BinaryKey, offset: u64, window: u64) -> bool {
        let cache = self.caches.entry(key.clone()).or_default();
        cache.last_seen = window;
        !cache.lines.contains_key(&offset)
    }

    /// The cached frames of `offset` in `key`.
    pub fn lines(&self, key: &BinaryKey, offset: u64) -> Option<&Arc<[Line]>> {
        self.caches.get(key)?.lines.get(&offset)
    }

    /// Symbolizes `todo` in `window` and caches the results; returns how
    /// many offsets were looked up and how many of them did not resolve.
    pub fn symbolize(
        &mut self,
        blaze: &mut Symbolizer,
        key: BinaryKey,
        todo: &Todo,
        window: u64,
    ) -> (u64, u64) {
        // Names read without the binary give way once it can be read.
        let cached = self
            .caches
            .get(&key)
            .and_then(|c| Some((c.names.clone()?, c.plt.clone())));
        let (names, plt) =
            if let Some(cached) = cached.filter(|(n, _)| !matches!(n, Names::DebugOnly { .. })) {
                cached
            } else {
                let (names, plt) = self.choose_names(&todo.path, todo.dir.as_deref());
                self.debug_files_used += u64::from(matches!(names, Names::DebugFile { .. }));
                (names, plt)
            };
        let resolved = match &names {
            Names::Own => self.parsed.read(
                blaze,
                Elf::new(todo.path.clone()),
                Input::FileOffset(&todo.offsets),
                window,
            ),
            Names::Dynsym => {
                let mut elf = Elf::new(todo.path.clone());
                elf.debug_syms = false;
                let input = Input::FileOffset(todo.offsets.as_slice());
                self.parsed.read(blaze, elf, input, window)
            }
            Names::DebugFile { path, facts } => {
                let virt: Vec<_> = todo.offsets.iter().map(|&o| facts.virt_offset(o)).collect();
                self.by_virtual_address(blaze, path, &virt, window)
            }
            Names::Go { table, facts } => go_lines(table, facts, &todo.offsets),
            Names::DebugOnly { .. } => vec![Arc::from([]); todo.offsets.len()],
        };
        let resolved = plt.name(&todo.offsets, resolved);
        self.caches.entry(key.clone()).or_default().plt = plt;
        self.store(key, names, &todo.offsets, resolved)
    }

    /// Symbolizes file offsets of binary `key` that cannot be read any more
    /// (its process is gone and the file deleted or replaced), each with
    /// the file offset its mapping starts at: by its debug file, found by
    /// build id in the debug directories or through debuginfod, which does
    /// not need the binary. Without one, nothing is cached, so a process
    /// that maps the binary still gets it read.
    pub fn symbolize_gone(
        &mut self,
        blaze: &mut Symbolizer,
        key: BinaryKey,
        offsets: &[(u64, u64)],
        window: u64,
    ) -> (u64, u64) {
        let cached = self.caches.get(&key).and_then(|c| c.names.clone());
        let names = match cached {
            Some(names @ (Names::DebugFile { .. } | Names::DebugOnly { .. })) => names,
            Some(_) => return (0, 0),
            None => {
                let BinaryKey::BuildId(id) = &key else {
                    return (0, 0);
                };
                let Some(names) = self.debug_file_by_id(id) else {
                    return (0, 0);
                };
                self.debug_files_used += 1;
                names
            }
        };
        let (path, virt): (&Path, Vec<Option<u64>>) = match &names {
            Names::DebugFile { path, facts } => (
                path,
                offsets.iter().map(|&(o, _)| facts.virt_offset(o)).collect(),
            ),
            Names::DebugOnly { path, text_vaddr } => {
                let page = text_vaddr & !0xfff;
                let virt = offsets
                    .iter()
                    .map(|&(o, pgoff)| o.checked_sub(pgoff).map(|d| page + d))
                    .collect();
                (path, virt)
            }
            _ => return (0, 0),
        };
        let resolved = self.by_virtual_address(blaze, path, &virt, window);
        let offsets: Vec<u64> = offsets.iter().map(|&(o, _)| o).collect();
        self.store(key, names, &offsets, resolved)
    }

    /// The debug file of build id `id` (hex), in the debug directories or
    /// through debuginfod, placed by its own code segment.
    fn debug_file_by_id(&mut self, id: &str) -> Option<Names> {
        let local = self
            .debug_dirs
            .iter()
            .filter_map(|dir| debug_files::build_id_path(dir, id))
            .find(|path| path.is_file());
        let path = match local {
            Some(path) => path,
            None => match self.debuginfod.as_mut()?.lookup(id) {
                DebugFile::Cached(path) => path,
                DebugFile::Pending | DebugFile::Unavailable => return None,
            },
        };
        let facts = ElfFacts::read(&path).ok()?;
        let same = facts.build_id.as_deref().map(hex);
        if same.as_deref() != Some(id) {
            return None;
        }
        Some(Names::DebugOnly {
            path: self.plain(path, facts.build_id.as_deref()),
            text_vaddr: facts.text_vaddr?,
        })
    }

    /// Symbolizes virtual addresses (`None`: a file offset outside the
    /// code) in a separate debug file.
    fn by_virtual_address(
        &mut self,
        blaze: &mut Symbolizer,
        debug_file: &Path,
        virt: &[Option<u64>],
        window: u64,
    ) -> Vec<Arc<[Line]>> {
        let known: Vec<u64> = virt.iter().flatten().copied().collect();
        let input = Input::VirtOffset(known.as_slice());
        let elf = Elf::new(debug_file);
        let mut resolved = self.parsed.read(blaze, elf, input, window).into_iter();
        virt.iter()
            .map(|v| match v {
                Some(_) => resolved.next().unwrap_or_else(|| Arc::new([])),
                None => Arc::new([]),
            })
            .collect()
    }

    /// Caches `resolved` (one entry per offset of `offsets`) under `key`;
    /// returns how many were looked up and how many did not resolve.
    fn store(
        &mut self,
        key: BinaryKey,
        names: Names,
        offsets: &[u64],
        resolved: Vec<Arc<[Line]>>,
    ) -> (u64, u64) {
        let cache = self.caches.entry(key).or_default();
        cache.names = Some(names);
        let mut failed = 0;
        for (&offset, lines) in offsets.iter().zip(resolved) {
            failed += u64::from(lines.is_empty());
            cache.lines.insert(offset, lines);
        }
        (offsets.len() as u64, failed)
    }

    /// Forgets what was resolved for binaries whose debug file debuginfod
    /// just delivered, so their next lookups use it.
    pub fn collect_downloads(&mut self) {
        let Some(debuginfod) = &mut self.debuginfod else {
            return;
        };
        for id in debuginfod.finished() {
            if let Some(cache) = self.caches.get_mut(&BinaryKey::BuildId(Arc::from(id))) {
                **cache = BinaryCache {
                    last_seen: cache.last_seen,
                    ..BinaryCache::default()
                };
            }
        }
    }

    /// Debuginfod's accounting since the last call (zero when it is off),
    /// and the downloads still under way.
    pub fn take_debuginfod_stats(&mut self) -> Option<(DebuginfodStats, u64)> {
        self.debuginfod
            .as_mut()
            .map(|d| (d.take_stats(), d.pending()))
    }

    /// Separate debug files first used since the last call.
    pub fn take_debug_files(&mut self) -> u64 {
        std::mem::take(&mut self.debug_files_used)
    }

    /// Drops binaries unseen for `windows` windows and those past
    /// [`MAX_BINARIES`], and the parsed files `window` did not read;
    /// returns how many binaries the bound dropped.
    pub fn end_window(&mut self, blaze: &mut Symbolizer, window: u64, windows: u64) -> u64 {
        self.caches.retain(|_, b| window - b.last_seen < windows);
        let evicted = self.bound(window);
        self.parsed.end_window(blaze, window);
        evicted
    }

    /// Drops the binaries seen least recently, but not in `window`, down
    /// to [`MAX_BINARIES`]; returns how many.
    fn bound(&mut self, window: u64) -> u64 {
        let excess = self.caches.len().saturating_sub(MAX_BINARIES);
        if excess == 0 {
            return 0;
        }
        let mut older: Vec<(u64, BinaryKey)> = self
            .caches
            .iter()
            .filter(|(_, cache)| cache.last_seen != window)
            .map(|(key, cache)| (cache.last_seen, key.clone()))
            .collect();
        let gone = least_recent(&mut older, excess);
        for (_, key) in gone {
            self.caches.remove(key);
        }
        gone.len() as u64
    }

    /// Binaries cached.
    pub fn len(&self) -> usize {
        self.caches.len()
    }

    /// Whether `key` is cached.
    #[cfg(test)]
    pub fn has(&self, key: &BinaryKey) -> bool {
        self.caches.contains_key(key)
    }

    /// Where the names of the binary at `path` come from, and its PLT
    /// stubs.
    fn choose_names(&mut self, path: &Path, dir: Option<&Path>) -> (Names, Arc<PltStubs>) {
        let Ok(facts) = ElfFacts::read(path) else {
            return (Names::Own, Arc::default());
        };
        let plt = facts.plt.clone();
        (self.names_of(path, dir, facts), plt)
    }

    fn names_of(&mut self, path: &Path, dir: Option<&Path>, facts: ElfFacts) -> Names {
        if facts.has_symtab {
            return Names::Own;
        }
        if let Some(debug) = debug_files::find(&facts, dir, &self.debug_dirs) {
            let path = self.plain(debug, facts.build_id.as_deref());
            return Names::DebugFile { path, facts };
        }
        // A stripped Go binary names itself: its runtime's own table.
        if let Ok(Some(table)) = GoTable::open(path) {
            return Names::Go {
                table: Arc::new(table),
                facts,
            };
        }
        let (Some(debuginfod), Some(id)) = (&mut self.debuginfod, &facts.build_id) else {
            return Names::Dynsym;
        };
        match debuginfod.lookup(&hex(id)) {
            DebugFile::Cached(debug) => {
                let path = self.plain(debug, facts.build_id.as_deref());
                Names::DebugFile { path, facts }
            }
            DebugFile::Pending | DebugFile::Unavailable => Names::Dynsym,
        }
    }

    /// The path to read debug file `debug` (of build id `build_id`)
    /// through: its plain copy if its sections are compressed
    /// (`inflated.rs`).
    fn plain(&mut self, debug: PathBuf, build_id: Option<&[u8]>) -> PathBuf {
        match &mut self.inflated {
            Some(inflated) => inflated.path_for(&debug, build_id),
            None => debug,
        }
    }
}

//! What a runtime's watcher knows of each executable file: what the
//! runtime loaded from it (for Go, its runtime facts and table), or "not
//! the runtime's". Loading one reads the binary (a Go binary's build info,
//! and the runtime's offsets from its DWARF where it has some), and what
//! it keeps may map the whole file (a Go binary's table). So what is
//! loaded is kept while processes run the file, and for a minute after,
//! for a program that is started again and again. Past that it is
//! dropped: under `--all`, a host that keeps running new binaries (each
//! build of a Go program is a new file) would otherwise keep a mapping of
//! each, and the disk space of those deleted since.
use std::collections::HashMap;

use profiler_common::bound::least_recent;

use super::seam::Loaded;
use crate::process::maps::FileId;

/// Refreshes of the target set (one a second) a file stays known after
/// its last use.
const KEEP_UNUSED_REFRESHES: u64 = 60;

/// Files known at most that no process runs: past it, the least recently
/// used go first (a build host starting a thousand new binaries within the
/// minute would otherwise keep each, and a Go binary's table maps it
/// whole).
const MAX_UNUSED: usize = 256;

/// A file's load, and the refresh that last used it.
struct Known<T> {
    loaded: Option<T>,
    last_used: u64,
}

/// The files known, by identity; `T` is what a load gives.
pub(super) struct Binaries<T> {
    files: HashMap<FileId, Known<T>>,
    /// Refreshes ended so far.
    refresh: u64,
}

impl<T> Default for Binaries<T> {
    fn default() -> Self {
        Self {
            files: HashMap::new(),
            refresh: 0,
        }
    }
}

impl<T: Clone> Binaries<T> {
    /// What `file` is: known, or read now by `load` (not the runtime's,
    /// or not readable, is remembered too; not readable now is not).
    pub fn get_or_load(&mut self, file: FileId, load: impl FnOnce() -> Loaded<T>) -> Loaded<T> {
        if let Some(known) = self.files.get_mut(&file) {
            known.last_used = self.refresh;
            return known.loaded.clone().map_or(Loaded::Not, Loaded::Runtime);
        }
        let loaded = match load() {
            Loaded::Runtime(binary) => Some(binary),
            Loaded::Not => None,
            Loaded::NotNow => return Loaded::NotNow,
        };
        self.files.insert(
            file,
            Known {
                loaded: loaded.clone(),
                last_used: self.refresh,
            },
        );
        loaded.map_or(Loaded::Not, Loaded::Runtime)
    }

    /// Ends a refresh, at which processes ran the files `in_use`; drops
    /// the files unused for [`KEEP_UNUSED_REFRESHES`].
    pub fn end_refresh(&mut self, in_use: impl IntoIterator<Item = FileId>) {
        for file in in_use {
            if let Some(known) = self.files.get_mut(&file) {
                known.last_used = self.refresh;
            }
        }
        let refresh = self.refresh;
        self.files
            .retain(|_, known| refresh - known.last_used < KEEP_UNUSED_REFRESHES);
        self.bound_unused();
        self.refresh += 1;
    }

    /// Drops the files unused in this refresh, least recently used first,
    /// down to [`MAX_UNUSED`] of them.
    fn bound_unused(&mut self) {
        let mut unused: Vec<(u64, FileId)> = self
            .files
            .iter()
            .filter(|(_, known)| known.last_used != self.refresh)
            .map(|(&file, known)| (known.last_used, file))
            .collect();
        let excess = unused.len().saturating_sub(MAX_UNUSED);
        for (_, file) in least_recent(&mut unused, excess) {
            self.files.remove(file);
        }
    }

    /// Whether `file` is known.
    #[cfg(test)]
    fn knows(&self, file: FileId) -> bool {
        self.files.contains_key(&file)
    }

    /// How many files are known.
    pub fn len(&self) -> usize {
        self.files.len()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn file(inode: u64) -> FileId {
        FileId { dev: 1, inode }
    }

    #[test]
    fn a_file_is_loaded_once_while_used_and_again_after_a_minute_unused() {
        let loads = Cell::new(0);
        let load = || {
            loads.set(loads.get() + 1);
            Loaded::Runtime(7)
        };
        let mut binaries = Binaries::default();
        assert_eq!(binaries.get_or_load(file(1), load), Loaded::Runtime(7));
        // A process runs it for two minutes: never loaded again.
        for _ in 0..120 {
            binaries.end_refresh([file(1)]);
            assert_eq!(binaries.get_or_load(file(1), load), Loaded::Runtime(7));
        }
        assert_eq!(loads.get(), 1);
        // Gone: the refresh it was last used in ends, then it is kept for
        // a minute of refreshes, then dropped.
        for _ in 0..KEEP_UNUSED_REFRESHES {
            binaries.end_refresh([]);
        }
        assert_eq!(binaries.len(), 1);
        binaries.end_refresh([]);
        assert_eq!(binaries.len(), 0);
        assert_eq!(binaries.get_or_load(file(1), load), Loaded::Runtime(7));
        assert_eq!(loads.get(), 2);
    }

    #[test]
    fn a_program_started_again_within_the_minute_is_not_loaded_again() {
        let loads = Cell::new(0);
        let load = || {
            loads.set(loads.get() + 1);
            Loaded::<u32>::Not
        };
        let mut binaries = Binaries::default();
        // A short-lived process, never running at a refresh, every 50 s:
        // "not Go" is remembered across the gaps.
        for _ in 0..5 {
            assert_eq!(binaries.get_or_load(file(2), load), Loaded::Not);
            for _ in 0..50 {
                binaries.end_refresh([]);
            }
        }
        assert_eq!(loads.get(), 1);
        for _ in 0..10 {
            binaries.end_refresh([]);
        }
        assert_eq!(binaries.len(), 1);
        binaries.end_refresh([]);
        assert_eq!(binaries.len(), 0);
    }

    #[test]
    fn files_no_process_runs_are_kept_up_to_a_bound_least_recently_used_first() {
        let mut binaries = Binaries::default();
        let mut run_once = |files: std::ops::Range<u64>| {
            for inode in files {
                binaries.get_or_load(file(inode), || Loaded::Runtime(inode));
            }
            binaries.end_refresh([]);
        };
        // Two refreshes' new binaries, each run once: within the bound.
        const { assert!(MAX_UNUSED > 200) };
        let max = MAX_UNUSED as u64;
        run_once(0..200);
        run_once(200..max + 40);
        // One more: past the bound, the oldest refresh's go first.
        run_once(max + 40..max + 41);
        assert_eq!(binaries.len(), MAX_UNUSED + 1);
        assert!((200..=max + 40).all(|i| binaries.knows(file(i))));
        let first = (0..200).filter(|&i| binaries.knows(file(i))).count();
        assert_eq!(first, 160);
    }

    #[test]
    fn a_file_not_readable_now_is_loaded_again_at_its_next_process() {
        let loads = Cell::new(0);
        let mut binaries = Binaries::default();
        // Its process exec'd between being looked at and the load.
        let not_now = || {
            loads.set(loads.get() + 1);
            Loaded::<u32>::NotNow
        };
        assert_eq!(binaries.get_or_load(file(3), not_now), Loaded::NotNow);
        assert_eq!(binaries.len(), 0);
        assert_eq!(
            binaries.get_or_load(file(3), || Loaded::Runtime(9)),
            Loaded::Runtime(9)
        );
        assert_eq!(binaries.get_or_load(file(3), not_now), Loaded::Runtime(9));
        assert_eq!(loads.get(), 1);
    }
}

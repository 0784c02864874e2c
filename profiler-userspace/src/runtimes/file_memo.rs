//! What a runtime's publisher made of each file a process maps (a Python
//! interpreter, a JVM, a Go runtime's label offsets, where the thread
//! context variable is; for most files, nothing), by the file's stamp:
//! read once per file, shared by the processes that map it.
//!
//! Under `--all` every new binary of the host is looked at, and a build
//! host makes new ones all day, so the memo is bounded: at [`MAX_FILES`],
//! the least recently used quarter is forgotten (read again, should a
//! process map one of them again).
use std::collections::HashMap;

use profiler_common::bound::least_recent;

use crate::process::{
    files::open_mapped,
    maps::{FileStamp, Vma},
};

/// Files remembered at most: more than a host's processes map at once
/// (hundreds to a few thousand files), so that a steady host reads each
/// file once.
pub(super) const MAX_FILES: usize = profiler_common::bound::MEMO_ENTRIES;

/// What was made of each file, and when it was last asked for.
pub(super) struct FileMemo<T> {
    files: HashMap<FileStamp, (T, u64)>,
    /// Lookups and inserts so far: the clock of `last use`.
    uses: u64,
}

impl<T> Default for FileMemo<T> {
    fn default() -> Self {
        Self {
            files: HashMap::new(),
            uses: 0,
        }
    }
}

impl<U> FileMemo<Option<U>> {
    /// Whether `stamp` is remembered as none of the runtime's (read, and
    /// found not to be: not merely unread, or unreadable).
    pub fn known_not(&self, stamp: &FileStamp) -> bool {
        matches!(self.files.get(stamp), Some((None, _)))
    }
}

impl<T: Clone> FileMemo<T> {
    /// What was made of `stamp`, if it is remembered.
    pub(super) fn get(&mut self, stamp: &FileStamp) -> Option<T> {
        self.uses += 1;
        let (made, used) = self.files.get_mut(stamp)?;
        *used = self.uses;
        Some(made.clone())
    }

    /// Remembers what was made of `stamp`, forgetting the least recently
    /// used quarter first when [`MAX_FILES`] are remembered.
    pub(super) fn insert(&mut self, stamp: FileStamp, made: T) {
        if self.files.len() >= MAX_FILES && !self.files.contains_key(&stamp) {
            self.forget_least_recent();
        }
        self.uses += 1;
        self.files.insert(stamp, (made, self.uses));
    }

    /// What was made of `stamp`, or what `read` makes of it now
    /// (remembered); `None` when `read` cannot read it now (the process
    /// gone): it is tried again with the next process that maps it.
    pub fn get_or_read(&mut self, stamp: FileStamp, read: impl FnOnce() -> Option<T>) -> Option<T> {
        if let Some(known) = self.get(&stamp) {
            return Some(known);
        }
        let made = read()?;
        self.insert(stamp, made.clone());
        Some(made)
    }

    /// As [`FileMemo::get_or_read`], `make` given the bytes of the file
    /// `pid` maps at `vma` (opened through the process's view of it).
    pub fn get_or_map(
        &mut self,
        pid: u32,
        vma: &Vma,
        stamp: FileStamp,
        make: impl FnOnce(&[u8]) -> T,
    ) -> Option<T> {
        self.get_or_read(stamp, || {
            let file = open_mapped(pid, vma).ok()?;
            // SAFETY: read-only; a binary is replaced by rename on
            // upgrade, which leaves this mapping intact.
            let data = unsafe { memmap2::Mmap::map(&file) }.ok()?;
            Some(make(&data))
        })
    }

    /// Whether `stamp` is remembered (read, whatever was made of it).
    pub fn has(&self, stamp: &FileStamp) -> bool {
        self.files.contains_key(stamp)
    }

    /// Files remembered.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    fn forget_least_recent(&mut self) {
        let mut entries: Vec<(u64, FileStamp)> = self
            .files
            .iter()
            .map(|(&stamp, &(_, used))| (used, stamp))
            .collect();
        for (_, stamp) in least_recent(&mut entries, MAX_FILES / 4) {
            self.files.remove(stamp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(ino: u64) -> FileStamp {
        FileStamp {
            dev: 1,
            ino,
            size: 4096,
            mtime: 0,
        }
    }

    #[test]
    fn a_full_memo_forgets_the_least_recently_used_quarter() {
        let mut memo = FileMemo::default();
        for ino in 0..MAX_FILES as u64 {
            memo.insert(stamp(ino), ino);
        }
        // The oldest file, used again, is kept past the next insert.
        assert_eq!(memo.get(&stamp(0)), Some(0));
        memo.insert(stamp(u64::MAX), 7);
        assert_eq!(memo.len(), MAX_FILES - MAX_FILES / 4 + 1);
        assert_eq!(memo.get(&stamp(0)), Some(0));
        assert_eq!(memo.get(&stamp(u64::MAX)), Some(7));
        // The quarter inserted first after it is gone, the rest is not.
        let quarter = (MAX_FILES / 4) as u64;
        assert_eq!(memo.get(&stamp(1)), None);
        assert_eq!(memo.get(&stamp(quarter)), None);
        assert_eq!(memo.get(&stamp(quarter + 1)), Some(quarter + 1));
    }

    #[test]
    fn a_file_remembered_again_takes_no_room() {
        let mut memo = FileMemo::default();
        for ino in 0..MAX_FILES as u64 {
            memo.insert(stamp(ino), 0u8);
        }
        memo.insert(stamp(5), 1);
        assert_eq!(memo.len(), MAX_FILES);
        assert_eq!(memo.get(&stamp(5)), Some(1));
        assert_eq!(memo.get(&stamp(0)), Some(0));
    }

    /// Known not the runtime's only when read and found not to be: a file
    /// unread, or whose read failed (the process gone), is not.
    #[test]
    fn a_file_is_known_not_the_runtimes_only_once_read_so() {
        let mut memo: FileMemo<Option<u8>> = FileMemo::default();
        assert!(!memo.known_not(&stamp(1)), "unread");
        assert_eq!(memo.get_or_read(stamp(1), || None), None);
        assert!(!memo.known_not(&stamp(1)), "its read failed");
        assert_eq!(memo.get_or_read(stamp(1), || Some(None)), Some(None));
        assert!(memo.known_not(&stamp(1)));
        assert_eq!(memo.get_or_read(stamp(2), || Some(Some(3))), Some(Some(3)));
        assert!(!memo.known_not(&stamp(2)), "the runtime's");
    }

    #[test]
    fn thousands_of_new_files_stay_within_the_bound() {
        let mut memo = FileMemo::default();
        for ino in 0..10 * MAX_FILES as u64 {
            memo.insert(stamp(ino), ());
            assert!(memo.len() <= MAX_FILES);
        }
    }
}

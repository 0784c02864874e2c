//! Build ids of mapped files, read once per file as stamped: a process that
//! starts maps the same few files as the thousand before it (the loader,
//! libc), and reading a build id opens and maps the whole file.
use std::{collections::HashMap, sync::Arc};

use super::{
    files::{read_build_id, read_digest},
    maps::{FileStamp, Vma},
};

/// Most files remembered; past it, the memory starts over.
const MAX_KNOWN: usize = profiler_common::bound::MEMO_ENTRIES;

/// What names a mapped file's contents: its GNU build id (hex; empty for
/// none), and for a file without one, its digest ([`read_digest`]) where
/// it was read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileIds {
    pub build_id: Arc<str>,
    pub digest: Option<u128>,
}

impl FileIds {
    /// The ids of the file `pid` maps at `vma`, read now (a process whose
    /// mappings are read at a window's end); `None` when its build id
    /// cannot be read (the process is gone).
    #[must_use]
    pub fn read(pid: u32, vma: &Vma) -> Option<Self> {
        let build_id: Arc<str> = read_build_id(pid, vma)?.into();
        let digest = (build_id.is_empty() && vma.is_file())
            .then(|| read_digest(pid, vma))
            .flatten();
        Some(Self { build_id, digest })
    }
}

/// The build ids read so far, by file stamp, and the digests of files
/// without one ([`read_digest`]).
#[derive(Default)]
pub struct BuildIds {
    /// Shared by every process's mappings of the file.
    known: HashMap<FileStamp, Arc<str>>,
    digests: HashMap<FileStamp, u128>,
    /// Files read, ever (the others came from memory).
    reads: u64,
}

impl BuildIds {
    /// The build id (hex; empty when it has none) of the file `pid` maps
    /// at `vma`, which was `stamp` when its mappings were read: from
    /// memory when that file was read before, else read now. Without a
    /// stamp (a file gone meanwhile) it is read, and not remembered.
    pub fn of(&mut self, pid: u32, vma: &Vma, stamp: Option<FileStamp>) -> Arc<str> {
        if let Some(known) = stamp.and_then(|stamp| self.known.get(&stamp)) {
            return known.clone();
        }
        self.reads += 1;
        // A read that failed (the process is gone by now) is not
        // remembered, so the next process reads it again; a file without
        // a build id (Debian's Go binaries) is.
        let Some(id) = read_build_id(pid, vma).map(Arc::<str>::from) else {
            return Arc::default();
        };
        if let Some(stamp) = stamp {
            if self.known.len() >= MAX_KNOWN {
                self.known.clear();
            }
            self.known.insert(stamp, id.clone());
        }
        id
    }

    /// The digest ([`read_digest`]) of the file `pid` maps at `vma`, which
    /// was `stamp` when its mappings were read: from memory when that file
    /// was read before, else read now (8 KiB); `None` when it cannot be
    /// read.
    pub fn digest_of(&mut self, pid: u32, vma: &Vma, stamp: FileStamp) -> Option<u128> {
        if let Some(&known) = self.digests.get(&stamp) {
            return Some(known);
        }
        let digest = read_digest(pid, vma)?;
        if self.digests.len() >= MAX_KNOWN {
            self.digests.clear();
        }
        self.digests.insert(stamp, digest);
        Some(digest)
    }

    /// The build id of the file `pid` maps at `vma` ([`BuildIds::of`]),
    /// and without one its digest ([`BuildIds::digest_of`]) when it has a
    /// stamp.
    pub fn ids_of(&mut self, pid: u32, vma: &Vma, stamp: Option<FileStamp>) -> FileIds {
        let build_id = self.of(pid, vma, stamp);
        let digest = stamp
            .filter(|_| build_id.is_empty() && vma.is_file())
            .and_then(|stamp| self.digest_of(pid, vma, stamp));
        FileIds { build_id, digest }
    }

    /// Files read so far.
    #[cfg(test)]
    #[must_use]
    pub fn reads(&self) -> u64 {
        self.reads
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::maps;

    #[test]
    fn a_file_is_read_once_per_stamp() {
        let pid = std::process::id();
        let vmas = maps::read(pid).unwrap();
        let own = std::fs::read_link("/proc/self/exe").unwrap();
        let vma = vmas
            .iter()
            .find(|v| std::path::Path::new(&*v.path) == own)
            .unwrap();
        let stamp = FileStamp::of_mapping(pid, vma).unwrap();
        let mut ids = BuildIds::default();
        let first = ids.of(pid, vma, Some(stamp));
        assert!(!first.is_empty(), "Rust binaries carry a build id");
        assert_eq!(ids.of(pid, vma, Some(stamp)), first);
        assert_eq!(ids.reads(), 1, "the second from memory");
        // The same file rewritten in place (another mtime) is read again.
        let rewritten = FileStamp {
            mtime: stamp.mtime + 1,
            ..stamp
        };
        assert_eq!(ids.of(pid, vma, Some(rewritten)), first);
        assert_eq!(ids.reads(), 2);
        // Without a stamp: read every time.
        ids.of(pid, vma, None);
        ids.of(pid, vma, None);
        assert_eq!(ids.reads(), 4);
    }
}

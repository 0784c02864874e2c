//! A process image as the kernel's mmap records told it
//! (`mapping_events/`), for processes gone before their window ends.
//!
//! Most images belong to processes that are never sampled, so they stay
//! compact until the symbolizer needs one: each file is shared by every
//! mapping of it, and a forked child shares its parent's list.
use std::sync::Arc;

use crate::process::maps::{FileId, Vma};

/// A file as it was mapped: its path, and what tells whether the file at
/// that path later is still the one mapped.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct MappedFile {
    /// As the process saw it (within its own root).
    pub path: Arc<str>,
    /// Its GNU build id, hex, which the kernel read at the mmap (5.12+).
    pub build_id: Option<Arc<str>>,
    /// Its device and inode, which the kernel reports when it did not
    /// read a build id (a Go binary has none).
    pub id: Option<FileId>,
}

/// One executable mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedVma {
    pub start: u64,
    pub end: u64,
    /// Offset in the file of `start`.
    pub offset: u64,
    pub file: Arc<MappedFile>,
}

/// What following the kernel's mmap records counted since the last chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordStats {
    /// Records the kernel could not write: its ring was full.
    pub lost: u64,
    /// Records that did not parse.
    pub unreadable: u64,
    /// Images that ended (an exit or exec), handed on with the chunk.
    pub ended: u64,
    /// Ended images dropped, for want of room, before a chunk took them.
    pub dropped: u64,
    /// Processes not followed, for want of room.
    pub untracked: u64,
}

impl RecordStats {
    pub fn add(&mut self, other: &Self) {
        self.lost += other.lost;
        self.unreadable += other.unreadable;
        self.ended += other.ended;
        self.dropped += other.dropped;
        self.untracked += other.untracked;
    }
}

/// One image of a process, from its exec (or fork) to its exit or next
/// exec: every executable mapping it made, in address order.
#[derive(Debug)]
pub struct RecordedImage {
    pub pid: u32,
    /// The name it ran under, from its exec; `None` for a forked copy.
    pub comm: Option<Arc<str>>,
    pub vmas: Arc<Vec<RecordedVma>>,
}

impl RecordedImage {
    /// The image's mappings, each with the build id the kernel read
    /// (empty for none).
    pub(crate) fn vmas(&self) -> impl Iterator<Item = (Vma, Arc<str>)> + '_ {
        self.vmas.iter().map(|recorded| {
            let vma = Vma {
                start: recorded.start,
                end: recorded.end,
                offset: recorded.offset,
                path: recorded.file.path.clone(),
                file: recorded.file.id,
            };
            (vma, recorded.file.build_id.clone().unwrap_or_default())
        })
    }
}

//! Each process's executable mappings, rebuilt from the kernel's records in
//! the order they happened, and handed on as a [`RecordedImage`] when the
//! image ends: at the process's exit, or at its exec into another program.
//!
//! A fork copies the parent's image (shared until either maps more); an
//! exec starts an empty one, which the loader's mmaps fill. A process the
//! records have not told of yet (it was running before the daemon, or the
//! ring lost its records) is read from `/proc` the first time it forks or
//! maps, while it certainly lives.
use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::Arc,
};

use crate::process::{
    maps::Vma,
    procfs,
    recorded::{MappedFile, RecordStats, RecordedImage, RecordedVma},
};

/// Most processes followed at once; past it, those whose `/proc` entry is
/// gone (their exit record lost) are forgotten, then new ones are not
/// followed.
const MAX_PROCESSES: usize = 1 << 16;

/// Most mappings kept per image: a process that maps more keeps its first.
const MAX_VMAS: usize = 4096;

/// Most ended images waiting for the next chunk; past it the oldest go
/// (counted). At about 300 bytes each, 16 Ki images are some 5 MB: a
/// thousand short processes a second for 16 s.
const MAX_ENDED: usize = 1 << 14;

/// A running process as `/proc` shows it, for one the records have not
/// told of: its name and executable mappings.
pub struct Running {
    pub comm: Option<Arc<str>>,
    pub vmas: Vec<Vma>,
}

/// What the kernel reported, in the order it happened.
#[derive(Debug)]
pub enum Event {
    /// A new process `pid`, a copy of `parent`.
    Fork { pid: u32, parent: u32 },
    /// `pid` runs a new program, named `comm`: its old mappings are gone.
    Exec { pid: u32, comm: Arc<str> },
    /// `pid` mapped a file (or the vDSO) executable.
    Mmap { pid: u32, mapping: NewMapping },
    /// The process `pid` exited (its leader thread did).
    Exit { pid: u32 },
}

/// An executable mapping as recorded.
#[derive(Debug)]
pub struct NewMapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub file: MappedFile,
}

/// A process's image while it runs.
struct Live {
    comm: Option<Arc<str>>,
    vmas: Arc<Vec<RecordedVma>>,
}

/// Every process followed, and the images that ended since the last
/// [`Images::take_ended`].
#[derive(Default)]
pub struct Images {
    live: HashMap<u32, Live>,
    /// Each file once, shared by every mapping of it.
    files: HashSet<Arc<MappedFile>>,
    ended: VecDeque<Arc<RecordedImage>>,
    /// Processes refused for want of room, ever.
    refused: u64,
    /// Counts since the last [`Images::take_ended`].
    pub stats: RecordStats,
}

impl Images {
    /// Follows `event`; `read_proc` reads a running process's name and
    /// mappings from `/proc`, for processes not followed yet.
    pub fn apply(&mut self, event: Event, read_proc: &mut dyn FnMut(u32) -> Option<Running>) {
        match event {
            Event::Fork { pid, parent } => {
                let Some(parent) = self.live_or_read(parent, read_proc) else {
                    return;
                };
                let child = Live {
                    comm: parent.comm.clone(),
                    vmas: parent.vmas.clone(),
                };
                self.start(pid, child);
            }
            Event::Exec { pid, comm } => {
                self.end(pid);
                let image = Live {
                    comm: Some(comm),
                    vmas: Arc::default(),
                };
                self.start(pid, image);
            }
            Event::Mmap { pid, mapping } => {
                let file = self.intern(mapping.file);
                let vma = RecordedVma {
                    start: mapping.start,
                    end: mapping.end,
                    offset: mapping.offset,
                    file,
                };
                if let Some(live) = self.live_or_read(pid, read_proc) {
                    insert(Arc::make_mut(&mut live.vmas), vma);
                }
            }
            Event::Exit { pid } => self.end(pid),
        }
    }

    /// The images that ended since the last call, oldest first, and the
    /// counts since then.
    pub fn take_ended(&mut self) -> (Vec<Arc<RecordedImage>>, RecordStats) {
        // Files no image refers to any more (only this set holds them).
        self.files.retain(|file| Arc::strong_count(file) > 1);
        (
            self.ended.drain(..).collect(),
            std::mem::take(&mut self.stats),
        )
    }

    /// Processes followed now.
    #[cfg(test)]
    pub fn followed(&self) -> usize {
        self.live.len()
    }

    /// `pid`'s image, read from `/proc` if it is not followed yet.
    fn live_or_read(
        &mut self,
        pid: u32,
        read_proc: &mut dyn FnMut(u32) -> Option<Running>,
    ) -> Option<&mut Live> {
        if !self.live.contains_key(&pid) {
            let Running { comm, vmas } = read_proc(pid)?;
            let vmas = vmas
                .into_iter()
                .map(|vma| RecordedVma {
                    start: vma.start,
                    end: vma.end,
                    offset: vma.offset,
                    file: self.intern(MappedFile {
                        path: vma.path,
                        build_id: None,
                        id: vma.file,
                    }),
                })
                .collect();
            // Its name too: a child it forks, which may never exec and
            // end before anyone reads it, has no other.
            let live = Live {
                comm,
                vmas: Arc::new(vmas),
            };
            self.start(pid, live);
        }
        self.live.get_mut(&pid)
    }

    fn start(&mut self, pid: u32, live: Live) {
        if self.live.len() >= MAX_PROCESSES && !self.live.contains_key(&pid) {
            // A sweep for processes whose exit was lost, on the first
            // refusal and every 1024th after: not one per event.
            if self.refused.is_multiple_of(1024) {
                self.live.retain(|&pid, _| procfs::exists(pid));
            }
            if self.live.len() >= MAX_PROCESSES {
                self.refused += 1;
                self.stats.untracked += 1;
                return;
            }
        }
        self.live.insert(pid, live);
    }

    /// Ends `pid`'s image, if it is followed and mapped anything.
    fn end(&mut self, pid: u32) {
        let Some(live) = self.live.remove(&pid) else {
            return;
        };
        if live.vmas.is_empty() {
            return;
        }
        self.ended.push_back(Arc::new(RecordedImage {
            pid,
            comm: live.comm,
            vmas: live.vmas,
        }));
        self.stats.ended += 1;
        if self.ended.len() > MAX_ENDED {
            self.ended.pop_front();
            self.stats.dropped += 1;
        }
    }

    fn intern(&mut self, file: MappedFile) -> Arc<MappedFile> {
        if let Some(known) = self.files.get(&file) {
            return known.clone();
        }
        let file = Arc::new(file);
        self.files.insert(file.clone());
        file
    }
}

/// Adds `vma` to `vmas` (sorted by start): it replaces whatever it overlaps,
/// as a new mapping does in the kernel.
fn insert(vmas: &mut Vec<RecordedVma>, vma: RecordedVma) {
    let overlapped: Vec<RecordedVma> = vmas
        .extract_if(.., |old| old.start < vma.end && vma.start < old.end)
        .collect();
    for old in overlapped {
        if old.start < vma.start {
            vmas.push(RecordedVma {
                end: vma.start,
                ..old.clone()
            });
        }
        if vma.end < old.end {
            vmas.push(RecordedVma {
                start: vma.end,
                offset: old.offset + (vma.end - old.start),
                ..old
            });
        }
    }
    if vmas.len() < MAX_VMAS {
        vmas.push(vma);
    }
    vmas.sort_by_key(|v| v.start);
}

#[cfg(test)]
mod tests;

//! Which ELF files blazesym keeps parsed from one window to the next.
//!
//! What blazesym keeps of a file it read (its pages mapped, its DWARF
//! units, sections it decompressed) would otherwise stay for the daemon's
//! life, for every binary it ever read: under `--all`, every binary of the
//! host. Our own cache holds the results by offset, so a file is needed
//! again only for addresses not seen before: one stays parsed while its
//! binary brings new ones, window after window (libc, the busy program,
//! the daemon itself), and is dropped after a window without any.
//!
//! Dropping every file right after its batch was tried: under `--all` at
//! the bench's 5 s windows it cut the peak RSS from about 72 to 60 MiB,
//! but parsing the busy binaries again every window took about 1% of a
//! core more, and held each window's end longer, which an on-demand
//! profile falling due meanwhile waits for. Dropping at once only the
//! files of binaries without new addresses the window before saved
//! little (71 MiB) and still parsed the busy ones twice.
//!
//! So a kept file stays parsed, but the pages a batch touched in it are
//! given back soon after the batch (`resident.rs`): once [`RELEASE_EVERY`]
//! files were read, and at the window's end. Giving each file's back
//! right after its batch read `/proc/self/maps` for each file read (about
//! 140 µs with 128 files mapped): for a build host's new binaries, one
//! read each.
//!
//! Past [`MAX_PARSED`] files, the one read least recently is dropped at
//! once: under `--all` with 10 s windows, 5,000 distinct programs (about
//! 1,450 new binaries a window) left the daemon at 53.9 MB, 37.9 with the
//! bound (bench section 16).

use std::{collections::HashMap, path::PathBuf, sync::Arc};

use blazesym::symbolize::{
    Input, Symbolizer,
    evict::{self, Evict},
    source::{Elf, Source},
};

use super::{convert::symbolize, resident};
use crate::profile::Line;

/// Files kept parsed at most: past it, the one read least recently is
/// dropped at once. A window that brings a thousand new binaries (a build
/// host) would otherwise hold all of them parsed until its end, each tens
/// of kilobytes of blazesym's state, and the heap's high-water mark with
/// them.
pub(super) const MAX_PARSED: usize = 128;

/// Files read between two givings back of their pages: the pages a read
/// touched stay resident for at most this many files' reads.
const RELEASE_EVERY: usize = 16;

#[derive(Default)]
pub(super) struct ParsedFiles {
    /// Files blazesym holds, by the window that last read them, and the
    /// read's number (for [`MAX_PARSED`]).
    last_read: HashMap<PathBuf, (u64, u64)>,
    reads: u64,
    /// Files read whose touched pages were not given back yet.
    touched: Vec<PathBuf>,
}

impl ParsedFiles {
    /// Looks `input` up in the ELF file `elf` in `window`.
    pub fn read(
        &mut self,
        blaze: &mut Symbolizer,
        elf: Elf,
        input: Input<&[u64]>,
        window: u64,
    ) -> Vec<Arc<[Line]>> {
        let path = elf.path.clone();
        let lines = symbolize(blaze, &Source::Elf(elf), input);
        if !self.touched.contains(&path) {
            self.touched.push(path.clone());
        }
        if self.touched.len() >= RELEASE_EVERY {
            self.give_back();
        }
        self.reads += 1;
        self.last_read.insert(path, (window, self.reads));
        if self.last_read.len() > MAX_PARSED {
            self.drop_least_recent(blaze);
        }
        lines
    }

    /// Has blazesym drop the file read least recently.
    fn drop_least_recent(&mut self, blaze: &mut Symbolizer) {
        let oldest = self
            .last_read
            .iter()
            .min_by_key(|&(_, &(_, read))| read)
            .map(|(path, _)| path.clone());
        if let Some(path) = oldest {
            self.last_read.remove(&path);
            let _ = blaze.evict(&Evict::Elf(evict::Elf::new(path)));
        }
    }

    /// Gives back the pages the reads since the last time touched.
    fn give_back(&mut self) {
        resident::release(&self.touched);
        self.touched.clear();
    }

    /// Gives back what the window's last reads touched, and has blazesym
    /// drop the files that `window` did not read.
    pub fn end_window(&mut self, blaze: &mut Symbolizer, window: u64) {
        self.give_back();
        self.last_read.retain(|path, &mut (read, _)| {
            let keep = read == window;
            if !keep {
                // Evicting a path blazesym does not cache is a no-op.
                let _ = blaze.evict(&Evict::Elf(evict::Elf::new(path.clone())));
            }
            keep
        });
    }
}

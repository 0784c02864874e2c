//! Which ELF files blazesym keeps parsed from one window to the next.
//!
//! What blazesym keeps of a file it read (its pages mapped, its DWARF
//! units, sections it decompressed) would otherwise stay for the daemon's
//! life, for every binary it ever read: under `--all`, every binary of the
//! host. Our own cache holds the results by offset, so a file is needed
//! again only for addresses not seen before. A binary that brings new ones
//! window after window (libc, the busy program, the daemon itself) stays
//! parsed while it does, since parsing it again each window costs more
//! CPU than the rest of the daemon; any other file is dropped as soon as
//! its batch is looked up.

use std::{collections::HashMap, path::PathBuf, sync::Arc};

use blazesym::symbolize::{
    Input, Symbolizer,
    evict::{self, Evict},
    source::{Elf, Source},
};

use super::symbolize;
use crate::profile::Line;

#[derive(Default)]
pub(super) struct ParsedFiles {
    /// Files kept parsed, by the window that last read them.
    kept: HashMap<PathBuf, u64>,
}

impl ParsedFiles {
    /// Looks `input` up in the ELF file `elf` in `window`. `hot`: its binary
    /// brought new addresses in the window before too, so it stays parsed
    /// until a window passes without reading it (`end_window`).
    pub fn read(
        &mut self,
        blaze: &mut Symbolizer,
        elf: Elf,
        input: Input<&[u64]>,
        hot: bool,
        window: u64,
    ) -> Vec<Arc<[Line]>> {
        let path = elf.path.clone();
        let resolved = symbolize(blaze, &Source::Elf(elf), input);
        if hot {
            self.kept.insert(path, window);
        } else {
            self.kept.remove(&path);
            drop_file(blaze, path);
        }
        resolved
    }

    /// Drops the files kept parsed that `window` did not read.
    pub fn end_window(&mut self, blaze: &mut Symbolizer, window: u64) {
        self.kept.retain(|path, &mut read| {
            let keep = read == window;
            if !keep {
                drop_file(blaze, path.clone());
            }
            keep
        });
    }
}

fn drop_file(blaze: &mut Symbolizer, path: PathBuf) {
    // Evicting a path blazesym does not cache is a no-op, not an error.
    let _ = blaze.evict(&Evict::Elf(evict::Elf::new(path)));
}

//! Code objects in an interpreter's own image: from 3.11 the modules every
//! interpreter runs at start (`importlib`, `site`, `os`, `codecs`...) are
//! deep-frozen, their code objects static data of the binary (or of
//! `libpython`), at the same file address in every process of that file
//! and never freed. A short `python3` runs little else, and reading each
//! process's took three reads a code object; they are read once per
//! interpreter file and shared.
use std::{collections::HashMap, sync::Arc};

use profiler_common::bound::MEMO_ENTRIES;

use super::code::CodeInfo;
use crate::process::maps::FileStamp;

/// A code object by its interpreter's file, its address there and the
/// first line the walk read of it.
type Key = (FileStamp, u64, u32);

/// The code objects read from interpreters' images.
#[derive(Debug, Default)]
pub struct Frozen(HashMap<Key, Arc<CodeInfo>>);

impl Frozen {
    /// The code object at file address `address` of interpreter `file`,
    /// as read before.
    pub fn get(&self, file: FileStamp, address: u64, first_line: u32) -> Option<Arc<CodeInfo>> {
        self.0.get(&(file, address, first_line)).cloned()
    }

    /// Remembers `info`, the code object at file address `address` of
    /// interpreter `file`; past [`MEMO_ENTRIES`] the memory starts over.
    pub fn insert(&mut self, file: FileStamp, address: u64, first_line: u32, info: Arc<CodeInfo>) {
        if self.0.len() >= MEMO_ENTRIES {
            self.0.clear();
        }
        self.0.insert((file, address, first_line), info);
    }
}

//! A goroutine's pprof labels (`runtime/pprof.Do`, `SetGoroutineLabels`),
//! read from outside. `g.labels` points at the program's `labelMap`: a
//! `map[string]string` up to Go 1.23, a sorted slice of key and value
//! pairs from 1.24. A goroutine is given a new set whenever its labels
//! change (a set is never changed in place), so each set is read once,
//! known by its address and its first word (the map's or the slice's
//! storage), which a set freed and another made in its place changes.
use std::{borrow::Cow, sync::Arc};

use rustc_hash::FxHashMap;

use crate::{
    runtimes::remote::{Memory, u64_at},
    sample::{Label, LabelValue},
};

/// The most labels read from one set, and the longest key or value (Go
/// limits neither; these only bound a torn read).
const MAX_LABELS: u64 = 1024;
const MAX_TEXT: u64 = 64 * 1024;
/// Sets kept before the cache starts afresh.
const MAX_SETS: usize = 4096;

/// How a Go version keeps a label set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `map[string]string` (Go 1.23 and before), behind one pointer.
    Map,
    /// `[]label{key, value string}`, sorted by key (Go 1.24 and later).
    Slice,
}

impl Form {
    #[must_use]
    pub fn of_minor(minor: u32) -> Self {
        if minor >= 24 { Self::Slice } else { Self::Map }
    }
}

/// One process's label sets, read as met.
pub struct LabelSets {
    form: Form,
    memory: Memory,
    sets: FxHashMap<(u64, u64), Arc<[Label]>>,
}

impl LabelSets {
    #[must_use]
    pub fn new(form: Form, memory: Memory) -> Self {
        Self {
            form,
            memory,
            sets: FxHashMap::default(),
        }
    }

    /// The labels of the set at `at` (a `g.labels`), sorted by key; empty
    /// for none (0) or a set that cannot be read.
    pub fn of(&mut self, at: u64) -> Arc<[Label]> {
        if at == 0 {
            return Arc::from([]);
        }
        let Some(first) = self.u64(at) else {
            return Arc::from([]);
        };
        if let Some(set) = self.sets.get(&(at, first)) {
            return Arc::clone(set);
        }
        let pairs = match self.form {
            Form::Map => self.map(first),
            Form::Slice => self.slice(at),
        };
        let mut labels: Vec<Label> = pairs
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| {
                let key: Cow<'static, str> = Cow::Owned(key);
                Label {
                    attribute: key.clone(),
                    key,
                    value: LabelValue::Str(Arc::from(value)),
                }
            })
            .collect();
        labels.sort();
        let set: Arc<[Label]> = Arc::from(labels);
        if self.sets.len() >= MAX_SETS {
            self.sets.clear();
        }
        self.sets.insert((at, first), Arc::clone(&set));
        set
    }

    /// A slice of pairs: its storage, length and capacity at `at`.
    fn slice(&self, at: u64) -> Option<Vec<(String, String)>> {
        let header = self.bytes(at, 24)?;
        let (list, len) = (u64_at(&header, 0)?, u64_at(&header, 8)?);
        if len > MAX_LABELS {
            return None;
        }
        let entries = self.bytes(list, len * 32)?;
        entries
            .chunks_exact(32)
            .map(|e| Some((self.string(e, 0)?, self.string(e, 16)?)))
            .collect()
    }

    /// A `map[string]string` whose header (`runtime.hmap`) is at `hmap`:
    /// every live cell of its buckets, and of the old buckets not yet
    /// moved while it grows.
    fn map(&self, hmap: u64) -> Option<Vec<(String, String)>> {
        let header = self.bytes(hmap, 48)?;
        let (flags, b) = (header[8], header[9]);
        let (buckets, old) = (u64_at(&header, 16)?, u64_at(&header, 24)?);
        if b > 8 || u64_at(&header, 0)? > MAX_LABELS {
            return None;
        }
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        // `sameSizeGrow`: the old buckets are as many as the new.
        let old_b = if flags & 8 != 0 {
            b
        } else {
            b.saturating_sub(1)
        };
        for (array, count) in [(buckets, 1u64 << b), (old, 1u64 << old_b)] {
            if array == 0 {
                continue;
            }
            for i in 0..count {
                self.bucket_chain(array + i * BUCKET_SIZE, &mut |key, value| {
                    if seen.insert(key.clone()) {
                        pairs.push((key, value));
                    }
                })?;
            }
        }
        Some(pairs)
    }

    /// The live cells of the bucket at `at` and its overflow buckets.
    fn bucket_chain(&self, mut at: u64, cell: &mut impl FnMut(String, String)) -> Option<()> {
        for _ in 0..MAX_OVERFLOW {
            if at == 0 {
                return Some(());
            }
            let bucket = self.bytes(at, BUCKET_SIZE)?;
            for i in 0..8 {
                // Below `minTopHash` (5): empty, or moved to the new
                // buckets.
                if bucket[i] < 5 {
                    continue;
                }
                let key = self.string(&bucket, 8 + 16 * i)?;
                let value = self.string(&bucket, 136 + 16 * i)?;
                cell(key, value);
            }
            at = u64_at(&bucket, 264)?;
        }
        Some(())
    }

    /// The Go string whose header (pointer, length) is at `at` in `bytes`.
    fn string(&self, bytes: &[u8], at: usize) -> Option<String> {
        let (ptr, len) = (u64_at(bytes, at as u64)?, u64_at(bytes, at as u64 + 8)?);
        if len > MAX_TEXT {
            return None;
        }
        if len == 0 {
            return Some(String::new());
        }
        String::from_utf8(self.bytes(ptr, len)?).ok()
    }

    fn u64(&self, at: u64) -> Option<u64> {
        u64_at(&self.bytes(at, 8)?, 0)
    }

    fn bytes(&self, at: u64, len: u64) -> Option<Vec<u8>> {
        let mut bytes = vec![0u8; usize::try_from(len).ok()?];
        self.memory.read(at, &mut bytes).ok()?;
        Some(bytes)
    }
}

/// A `map[string]string` bucket on amd64: 8 top hashes, 8 keys and 8
/// values (16-byte string headers), and the overflow pointer.
const BUCKET_SIZE: u64 = 8 + 8 * 16 + 8 * 16 + 8;
/// Overflow buckets followed per bucket.
const MAX_OVERFLOW: usize = 16;

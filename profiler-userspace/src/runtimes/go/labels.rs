//! A goroutine's pprof labels (`runtime/pprof.Do`, `SetGoroutineLabels`),
//! read from outside. `g.labels` points at the program's `labelMap`: a
//! `map[string]string` up to Go 1.23, a sorted slice of key and value
//! pairs from 1.24. A goroutine is given a new set whenever its labels
//! change (a set is never changed in place), so each set is read once,
//! known by its address and identity (`profiler_common::go::set_identity`,
//! which the kernel's samples record too), which a set freed and another
//! made in its place changes.
use std::sync::Arc;

use profiler_common::go::{MAP_HASH0, PAIR_VALUE, SLICE_LEN, form, set_identity};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::{
    process::memory::{Memory, u64_at},
    sample::Label,
};

/// The most labels read from one set, and the longest key or value (Go
/// limits neither; these only bound a torn read).
const MAX_LABELS: u64 = 1024;
const MAX_TEXT: u64 = 64 * 1024;
/// Sets kept: every goroutine of a busy service may have its own set
/// (`pprof.Do` makes one per call), and one forgotten is read again at
/// its next sight. Past it, the sets not used in the last
/// [`RECENT_READS`] reads are dropped.
const MAX_SETS: usize = 65_536;
const RECENT_READS: u64 = 200;

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

    /// As the kernel's samples know it (`profiler_common::go::form`).
    #[must_use]
    pub fn kernel(self) -> u32 {
        match self {
            Self::Map => form::MAP,
            Self::Slice => form::SLICE,
        }
    }
}

/// The label sets that left samples unlabelled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetCounts {
    /// Gone (or another in their place) by the time they were read.
    pub gone: u64,
    /// Torn or absurd when read (a length beyond the limits, a pointer
    /// that does not read, a map with too many overflow buckets).
    pub unreadable: u64,
}

impl SetCounts {
    pub fn add(&mut self, other: Self) {
        self.gone += other.gone;
        self.unreadable += other.unreadable;
    }
}

/// A set's labels, and the read that last used them.
type Kept = (Arc<[Label]>, u64);

/// One process's label sets, read as met.
pub struct LabelSets {
    form: Form,
    memory: Memory,
    /// By address and identity.
    sets: FxHashMap<(u64, u64), Kept>,
    /// One copy of each distinct set: many goroutines' sets hold the same
    /// labels.
    interned: FxHashSet<Arc<[Label]>>,
    /// Reads so far ([`Self::of_many`] calls).
    reads: u64,
    pub counts: SetCounts,
}

impl LabelSets {
    #[must_use]
    pub fn new(form: Form, memory: Memory) -> Self {
        Self {
            form,
            memory,
            sets: FxHashMap::default(),
            interned: FxHashSet::default(),
            reads: 0,
            counts: SetCounts::default(),
        }
    }

    /// The labels of the set at `at` (a `g.labels`), sorted by key; empty
    /// for none (0) or a set that cannot be read.
    pub fn of(&mut self, at: u64) -> Arc<[Label]> {
        if at == 0 {
            return Arc::from([]);
        }
        match self.identity(at) {
            Some(identity) => self.of_checked(at, identity),
            None => Arc::from([]),
        }
    }

    /// The labels of the set at `at` whose identity was `identity` when
    /// sampled; empty when the set there now is another (or none).
    pub fn of_checked(&mut self, at: u64, identity: u64) -> Arc<[Label]> {
        if let Some((set, used)) = self.sets.get_mut(&(at, identity)) {
            *used = self.reads;
            return Arc::clone(set);
        }
        if self.identity(at) != Some(identity) {
            self.counts.gone += 1;
            return Arc::from([]);
        }
        let pairs = match self.form {
            Form::Map => self.u64(at).and_then(|header| self.map(header)),
            Form::Slice => self.slice(at),
        };
        let Some(pairs) = pairs else {
            // Not kept: a set caught mid-write reads whole later.
            self.counts.unreadable += 1;
            return Arc::from([]);
        };
        let mut labels: Vec<Label> = pairs
            .into_iter()
            .map(|(key, value)| Label::own(key, &value))
            .collect();
        labels.sort();
        let set: Arc<[Label]> = Arc::from(labels);
        let set = if let Some(known) = self.interned.get(&set) {
            Arc::clone(known)
        } else {
            self.interned.insert(Arc::clone(&set));
            set
        };
        if self.sets.len() >= MAX_SETS {
            self.evict();
        }
        self.sets
            .insert((at, identity), (Arc::clone(&set), self.reads));
        set
    }

    /// Drops the sets not used in the last [`RECENT_READS`] reads (all of
    /// them if that leaves too many), and the copies no set holds.
    fn evict(&mut self) {
        let since = self.reads.saturating_sub(RECENT_READS);
        self.sets.retain(|_, (_, used)| *used >= since);
        if self.sets.len() >= MAX_SETS {
            self.sets.clear();
        }
        self.interned.retain(|set| Arc::strong_count(set) > 1);
    }

    /// The labels of the set at each of `ats` (goroutines' `g.labels`),
    /// as [`Self::of`] gives them, their identities read in two batches
    /// for all of them: checked one by one, 10,000 labelled goroutines
    /// cost the daemon 57% of a core (BENCHMARKS.md, section 11).
    pub fn of_many(&mut self, ats: impl Iterator<Item = u64>) -> FxHashMap<u64, Arc<[Label]>> {
        self.reads += 1;
        let mut distinct: Vec<u64> = ats.filter(|&at| at != 0).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let identities = self
            .identities(&distinct)
            .unwrap_or_else(|| distinct.iter().map(|&at| self.identity(at)).collect());
        distinct
            .into_iter()
            .zip(identities)
            .map(|(at, identity)| {
                let set = identity.map_or_else(|| Arc::from([]), |id| self.of_checked(at, id));
                (at, set)
            })
            .collect()
    }

    /// The identities of the sets at `ats` now, in two batched reads;
    /// `None` when a batch cannot be read whole (then each is read alone).
    fn identities(&self, ats: &[u64]) -> Option<Vec<Option<u64>>> {
        let heads = self.batch(ats.iter().map(|&at| (at, 16)))?;
        let words = |head: &[u8]| (u64_at(head, 0).unwrap_or(0), u64_at(head, 8).unwrap_or(0));
        // The second read of each: the map's seed, or the slice's first
        // pair (none for an empty slice, or a null pointer).
        let second = |(first, len): (u64, u64)| match self.form {
            Form::Map => (first != 0).then_some((first + MAP_HASH0, 8)),
            Form::Slice => (first != 0 && len != 0).then_some((first, PAIR_VALUE + 8)),
        };
        let seconds: Vec<Option<(u64, u64)>> = heads.iter().map(|h| second(words(h))).collect();
        let mut tails = self.batch(seconds.iter().flatten().copied())?.into_iter();
        Some(
            heads
                .iter()
                .zip(seconds)
                .map(|(head, second)| {
                    let (first, len) = words(head);
                    let tail = second.and_then(|_| tails.next());
                    let parts = match (self.form, tail) {
                        (Form::Map, Some(tail)) => [first, u64_at(&tail, 0)? & 0xffff_ffff, 0, 0],
                        (Form::Slice, _) if len == 0 => [first, 0, 0, 0],
                        (Form::Slice, Some(tail)) => {
                            [first, len, u64_at(&tail, 0)?, u64_at(&tail, PAIR_VALUE)?]
                        }
                        _ => return None,
                    };
                    Some(set_identity(parts))
                })
                .collect(),
        )
    }

    /// The bytes of each `(address, length)` of `ranges`, in one read.
    fn batch(&self, ranges: impl Iterator<Item = (u64, u64)>) -> Option<Vec<Vec<u8>>> {
        let ranges: Vec<(u64, usize)> = ranges
            .map(|(at, len)| Some((at, usize::try_from(len).ok()?)))
            .collect::<Option<_>>()?;
        let mut out = vec![0u8; ranges.iter().map(|r| r.1).sum()];
        if !ranges.is_empty() {
            self.memory.read_many(&ranges, &mut out).ok()?;
        }
        let mut rest = out.as_slice();
        Some(
            ranges
                .iter()
                .map(|&(_, len)| {
                    let (one, next) = rest.split_at(len);
                    rest = next;
                    one.to_vec()
                })
                .collect(),
        )
    }

    /// The identity of the set at `at` now (`set_identity`).
    fn identity(&self, at: u64) -> Option<u64> {
        let first = self.u64(at)?;
        let words = match self.form {
            Form::Map => [first, self.u64(first + MAP_HASH0)? & 0xffff_ffff, 0, 0],
            Form::Slice => match self.u64(at + SLICE_LEN)? {
                0 => [first, 0, 0, 0],
                len => [first, len, self.u64(first)?, self.u64(first + PAIR_VALUE)?],
            },
        };
        Some(set_identity(words))
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

#[cfg(test)]
mod tests;

//! The attributes of OpenTelemetry thread context records the samples
//! read (`THREAD_ATTRS`, by the hash each sample key holds), as each
//! drain finds them: (key index, value), each index once.
use std::{collections::HashMap as StdHashMap, sync::Arc};

use aya::maps::{HashMap, Map, MapData};
use profiler_common::{maps::THREAD_ATTRS, thread_ctx::ThreadAttrs};

use super::error::KernelError;
use crate::sample::ThreadAttrValues;

/// A drain's reads of the map: each hash looked up once.
pub(super) struct AttrsRead<'a> {
    map: HashMap<&'a MapData, u64, ThreadAttrs>,
    read: StdHashMap<u64, Option<Arc<ThreadAttrValues>>>,
    /// Samples whose attributes the map no longer held.
    pub lost: u64,
}

impl<'a> AttrsRead<'a> {
    /// Reads from `map` (the LRU map, which aya opens as a hash map).
    pub(super) fn new(map: &'a Map) -> Result<Self, KernelError> {
        Ok(Self {
            map: HashMap::try_from(map).map_err(KernelError::map(THREAD_ATTRS))?,
            read: StdHashMap::new(),
            lost: 0,
        })
    }

    /// The attributes kept under `hash` (0: none).
    pub(super) fn get(&mut self, hash: u64) -> Option<Arc<ThreadAttrValues>> {
        if hash == 0 {
            return None;
        }
        let map = &self.map;
        let found = self
            .read
            .entry(hash)
            .or_insert_with(|| map.get(&hash, 0).ok().map(|attrs| values(&attrs)))
            .clone();
        if found.is_none() {
            self.lost += 1;
        }
        found
    }
}

/// The entries of `attrs`, each key index with its last value (a writer
/// may append a new value rather than rewrite the record), in the order
/// first written; a value that is not UTF-8 as lossy text.
#[must_use]
pub fn values(attrs: &ThreadAttrs) -> Arc<ThreadAttrValues> {
    let mut out: Vec<(u8, Arc<str>)> = Vec::new();
    for (key, value) in attrs.entries() {
        let value: Arc<str> = Arc::from(String::from_utf8_lossy(value));
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => out.push((key, value)),
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use profiler_common::thread_ctx::ATTRS_WORDS;

    use super::*;

    #[test]
    fn an_index_written_again_keeps_its_last_value() {
        let bytes = b"\x00\x09/checkout\x01\x04POST\x00\x06/other\x02\x03\xff\xfe!";
        let mut attrs = ThreadAttrs {
            len: bytes.len() as u64,
            words: [0; ATTRS_WORDS],
        };
        for (i, b) in bytes.iter().enumerate() {
            attrs.words[i / 8] |= u64::from(*b) << (8 * (i % 8));
        }
        let read = values(&attrs);
        assert_eq!(
            read.iter().map(|(k, v)| (*k, &**v)).collect::<Vec<_>>(),
            [(0, "/other"), (1, "POST"), (2, "\u{fffd}\u{fffd}!")]
        );
    }
}

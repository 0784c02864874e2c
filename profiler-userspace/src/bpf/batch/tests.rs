//! Taking a real kernel hash map's entries (root): every entry once, the
//! map left empty, also where a bucket holds more entries than one call
//! has room for.
use aya::maps::{HashMap, Map, MapData};
use aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_HASH;

use super::{BATCH_BYTES, take_all_of, take_all_of_with};

/// A value so large that one call has room for a single entry: any
/// bucket with two has the call asked again with more room.
type Big = [u8; BATCH_BYTES / 2];

/// Entries and buckets (a hash map has as many as its entries, rounded up
/// to a power of two): eight keys in eight buckets all land apart one
/// time in 416, so two share a bucket in nearly every run.
const ENTRIES: u32 = 8;

fn hash_map(value_size: usize) -> Map {
    let obj = aya_obj::Map::new_from_params(
        BPF_MAP_TYPE_HASH as u32,
        4,
        u32::try_from(value_size).unwrap(),
        ENTRIES,
        0,
    );
    Map::HashMap(MapData::create(obj, "batch_test", None).expect("creating a hash map (root)"))
}

/// Entry `key`'s value, on the heap (it is too large for a test's stack).
fn value(key: u32) -> Box<Big> {
    let mut value = vec![0u8; BATCH_BYTES / 2];
    value[..4].copy_from_slice(&key.to_ne_bytes());
    value[BATCH_BYTES / 2 - 1] = u8::try_from(key).unwrap();
    value.into_boxed_slice().try_into().unwrap()
}

#[test]
fn takes_every_entry_once_when_a_bucket_outgrows_a_call() {
    let mut map = hash_map(size_of::<Big>());
    {
        let mut entries: HashMap<&mut MapData, u32, Big> = HashMap::try_from(&mut map).unwrap();
        for key in 0..ENTRIES {
            entries.insert(key, value(key).as_ref(), 0).unwrap();
        }
    }
    let mut taken = take_all_of_with(&map, "batch_test", |key: u32, big: &Big| {
        assert!(big[..] == value(key)[..], "entry {key}'s value");
        key
    })
    .unwrap();
    taken.sort_unstable();
    assert_eq!(taken, (0..ENTRIES).collect::<Vec<_>>());
    let left: Vec<(u32, Big)> = take_all_of(&map, "batch_test").unwrap();
    assert!(left.is_empty(), "{} entries left", left.len());
}

#[test]
fn takes_small_entries_in_one_call() {
    let mut map = hash_map(size_of::<u64>());
    {
        let mut entries: HashMap<&mut MapData, u32, u64> = HashMap::try_from(&mut map).unwrap();
        for key in 0..ENTRIES {
            entries.insert(key, u64::from(key) * 3, 0).unwrap();
        }
    }
    let mut taken: Vec<(u32, u64)> = take_all_of(&map, "batch_test").unwrap();
    taken.sort_unstable();
    let expected: Vec<(u32, u64)> = (0..ENTRIES).map(|k| (k, u64::from(k) * 3)).collect();
    assert_eq!(taken, expected);
}

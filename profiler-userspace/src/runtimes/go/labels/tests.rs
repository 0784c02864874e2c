use super::*;
use crate::sample::LabelValue;

fn put(buf: &mut [u8], at: u64, word: u64) {
    let at = usize::try_from(at).unwrap();
    buf[at..at + 8].copy_from_slice(&word.to_le_bytes());
}

/// A Go string header for `text` at `at` in `buf`.
fn put_string(buf: &mut [u8], at: u64, text: &'static str) {
    put(buf, at, text.as_ptr() as u64);
    put(buf, at + 8, text.len() as u64);
}

fn pairs(set: &[Label]) -> Vec<(String, String)> {
    set.iter()
        .map(|l| {
            let LabelValue::Str(value) = &l.value else {
                panic!("a string label")
            };
            assert_eq!(l.key, l.attribute);
            (l.key.to_string(), value.to_string())
        })
        .collect()
}

fn sets(form: Form) -> LabelSets {
    LabelSets::new(
        form,
        Memory {
            pid: std::process::id(),
        },
    )
}

#[test]
fn a_slice_of_pairs_reads_in_key_order() {
    let mut list = vec![0u8; 64];
    put_string(&mut list, 0, "endpoint");
    put_string(&mut list, 16, "/heavy");
    put_string(&mut list, 32, "tenant");
    put_string(&mut list, 48, "");
    let mut header = vec![0u8; 24];
    put(&mut header, 0, list.as_ptr() as u64);
    put(&mut header, 8, 2);
    put(&mut header, 16, 2);
    let set = sets(Form::Slice).of(header.as_ptr() as u64);
    assert_eq!(
        pairs(&set),
        [
            ("endpoint".into(), "/heavy".into()),
            ("tenant".into(), String::new())
        ]
    );
    assert!(sets(Form::Slice).of(0).is_empty());
}

#[test]
fn an_absurd_set_is_counted_unreadable_and_left_unlabelled() {
    let mut list = vec![0u8; 16];
    put_string(&mut list, 0, "endpoint");
    let mut header = vec![0u8; 24];
    put(&mut header, 0, list.as_ptr() as u64);
    put(&mut header, 8, MAX_LABELS + 1);
    let mut sets = sets(Form::Slice);
    assert!(sets.of(header.as_ptr() as u64).is_empty());
    assert_eq!(
        sets.counts,
        SetCounts {
            gone: 0,
            unreadable: 1
        }
    );
    // A string whose pointer does not read.
    put(&mut header, 8, 1);
    let mut pair = vec![0u8; 32];
    put(&mut pair, 0, 8);
    put(&mut pair, 8, 3);
    put(&mut header, 0, pair.as_ptr() as u64);
    assert!(sets.of(header.as_ptr() as u64).is_empty());
    assert_eq!(sets.counts.unreadable, 2);
}

#[test]
fn a_growing_map_reads_its_live_cells_in_both_bucket_arrays() {
    // Two buckets (B = 1): a live cell in the first, an emptied one
    // (tophash 1) in the second, whose overflow bucket has another;
    // one old bucket with a cell not moved yet and one moved (2).
    let size = usize::try_from(BUCKET_SIZE).unwrap();
    let mut new = vec![0u8; 2 * size];
    let mut overflow = vec![0u8; size];
    let mut old = vec![0u8; size];
    new[0] = 9;
    put_string(&mut new, 8, "b");
    put_string(&mut new, 136, "2");
    new[size] = 1;
    put_string(&mut new, BUCKET_SIZE + 8, "gone");
    put_string(&mut new, BUCKET_SIZE + 136, "x");
    overflow[3] = 200;
    put_string(&mut overflow, 8 + 3 * 16, "c");
    put_string(&mut overflow, 136 + 3 * 16, "3");
    put(&mut new, 2 * BUCKET_SIZE - 8, overflow.as_ptr() as u64);
    old[0] = 7;
    put_string(&mut old, 8, "a");
    put_string(&mut old, 136, "1");
    old[1] = 2;
    put_string(&mut old, 24, "b");
    put_string(&mut old, 152, "stale");
    let mut hmap = vec![0u8; 48];
    put(&mut hmap, 0, 3);
    hmap[9] = 1;
    put(&mut hmap, 16, new.as_ptr() as u64);
    put(&mut hmap, 24, old.as_ptr() as u64);
    // `g.labels` points at the map variable, which holds the header's
    // address.
    let variable = hmap.as_ptr() as u64;
    let at = std::ptr::from_ref(&variable) as u64;
    let set = sets(Form::Map).of(at);
    assert_eq!(
        pairs(&set),
        [
            ("a".into(), "1".into()),
            ("b".into(), "2".into()),
            ("c".into(), "3".into())
        ]
    );
    // Read in a batch, with a goroutine without labels: the same.
    let batch = sets(Form::Map).of_many([at, 0, at].into_iter());
    assert_eq!(batch.len(), 1);
    assert_eq!(pairs(&batch[&at]), pairs(&set));
}

#[test]
fn sets_read_in_a_batch_are_those_read_alone() {
    let mut list = vec![0u8; 32];
    put_string(&mut list, 0, "endpoint");
    put_string(&mut list, 16, "/batch");
    let mut header = vec![0u8; 24];
    put(&mut header, 0, list.as_ptr() as u64);
    put(&mut header, 8, 1);
    let empty = [0u8; 24];
    let (at, none) = (header.as_ptr() as u64, empty.as_ptr() as u64);
    let mut sets = sets(Form::Slice);
    let batch = sets.of_many([at, none].into_iter());
    assert_eq!(pairs(&batch[&at]), [("endpoint".into(), "/batch".into())]);
    assert!(batch[&none].is_empty());
    // An address that does not read: the batch falls back to each
    // alone, and the others still read.
    let batch = sets.of_many([at, 8].into_iter());
    assert_eq!(pairs(&batch[&at]), [("endpoint".into(), "/batch".into())]);
    assert!(batch[&8].is_empty());
}

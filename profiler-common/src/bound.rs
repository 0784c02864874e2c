//! Size bounds on the daemon's caches: how many entries, and which go
//! first.

/// The most entries a memo keyed by file or cgroup keeps: as many as a
/// hash table of 4,096 buckets holds (hashbrown fills its tables to 7/8),
/// so that a memo at its bound keeps that table; at 4,096 entries it
/// would have doubled it to 8,192 buckets, half of them empty.
pub const MEMO_ENTRIES: usize = 3_584;

/// The `count` least recent of `entries`, each `(last use, key)`, the
/// least recent first (all of them when there are fewer). Reorders
/// `entries`.
pub fn least_recent<T: Ord + Copy, K>(entries: &mut [(T, K)], count: usize) -> &[(T, K)] {
    let count = count.min(entries.len());
    if count == 0 {
        return &[];
    }
    if count < entries.len() {
        entries.select_nth_unstable_by_key(count - 1, |&(used, _)| used);
    }
    let chosen = &mut entries[..count];
    chosen.sort_unstable_by_key(|&(used, _)| used);
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recent_come_first_and_no_more_than_there_are() {
        let mut entries = [(5, 'e'), (1, 'a'), (4, 'd'), (2, 'b'), (3, 'c')];
        let keys =
            |chosen: &[(u32, char)]| chosen.iter().map(|&(_, k)| k).collect::<std::vec::Vec<_>>();
        assert_eq!(keys(least_recent(&mut entries, 2)), ['a', 'b']);
        assert_eq!(keys(least_recent(&mut entries, 0)), []);
        assert_eq!(
            keys(least_recent(&mut entries, 9)),
            ['a', 'b', 'c', 'd', 'e']
        );
        assert_eq!(keys(least_recent(&mut [] as &mut [(u32, char)], 3)), []);
    }
}

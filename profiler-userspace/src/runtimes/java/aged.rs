//! A JVM's methods and compilations as read, kept while the windows keep
//! asking for them. A JVM that runs for weeks compiles, frees and compiles
//! its code again all along (and may load generated classes): without an
//! age, every compilation ever sampled would stay.
use std::{collections::HashMap, hash::Hash};

/// Windows an entry stays unused, as the symbolizer keeps a binary.
const KEEP_UNUSED_WINDOWS: u64 = 10;

/// Values by key, each with the window that last asked for it.
pub(super) struct Aged<K, V> {
    entries: HashMap<K, (V, u64)>,
    window: u64,
}

impl<K, V> Default for Aged<K, V> {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
            window: 0,
        }
    }
}

impl<K: Eq + Hash, V: Clone> Aged<K, V> {
    /// The value of `key`, if kept.
    pub fn get(&mut self, key: &K) -> Option<V> {
        let (value, used) = self.entries.get_mut(key)?;
        *used = self.window;
        Some(value.clone())
    }

    pub fn insert(&mut self, key: K, value: V) {
        self.entries.insert(key, (value, self.window));
    }

    /// Ends a window: drops what the last [`KEEP_UNUSED_WINDOWS`] did not
    /// ask for.
    pub fn end_window(&mut self) {
        self.window += 1;
        let window = self.window;
        self.entries
            .retain(|_, (_, used)| window - *used < KEEP_UNUSED_WINDOWS);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_unused_for_ten_windows_goes_and_one_in_use_stays() {
        let mut aged = Aged::default();
        aged.insert(1, "old");
        aged.insert(2, "used");
        for _ in 0..KEEP_UNUSED_WINDOWS - 1 {
            aged.end_window();
            assert_eq!(aged.get(&2), Some("used"));
        }
        assert_eq!(aged.len(), 2, "kept for ten windows");
        aged.end_window();
        assert_eq!(aged.get(&1), None);
        assert_eq!(aged.get(&2), Some("used"));
        for _ in 0..KEEP_UNUSED_WINDOWS {
            aged.end_window();
        }
        assert_eq!(aged.len(), 0);
    }
}

//! Space in the kernel's row array: first-fit allocation of one run of rows
//! per binary, within the `--unwind-table-memory` budget.
use std::collections::BTreeMap;

/// Free runs of the row array, by start index.
#[derive(Debug)]
pub struct RowSpace {
    /// start -> length of each free run; adjacent runs are merged.
    free: BTreeMap<u32, u32>,
    capacity: u32,
}

impl RowSpace {
    #[must_use]
    pub fn new(capacity: u32) -> Self {
        let mut free = BTreeMap::new();
        if capacity > 0 {
            free.insert(0, capacity);
        }
        Self { free, capacity }
    }

    /// Rows in use.
    #[must_use]
    pub fn used(&self) -> u32 {
        self.capacity - self.free.values().sum::<u32>()
    }

    /// The start of a free run of `len` rows, now taken; `None` if no run
    /// is long enough.
    pub fn alloc(&mut self, len: u32) -> Option<u32> {
        if len == 0 {
            return Some(0);
        }
        let (&start, &run) = self.free.iter().find(|&(_, &run)| run >= len)?;
        self.free.remove(&start);
        if run > len {
            self.free.insert(start + len, run - len);
        }
        Some(start)
    }

    /// Gives back `len` rows at `start`.
    pub fn release(&mut self, start: u32, len: u32) {
        if len == 0 {
            return;
        }
        let (mut start, mut len) = (start, len);
        if let Some((&prev, &prev_len)) = self.free.range(..start).next_back()
            && prev + prev_len == start
        {
            self.free.remove(&prev);
            start = prev;
            len += prev_len;
        }
        if let Some(next_len) = self.free.remove(&(start + len)) {
            len += next_len;
        }
        self.free.insert(start, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_first_fit_and_merges_on_release() {
        let mut space = RowSpace::new(100);
        let a = space.alloc(40).unwrap();
        let b = space.alloc(40).unwrap();
        assert_eq!((a, b), (0, 40));
        assert_eq!(space.alloc(30), None, "only 20 left");
        assert_eq!(space.used(), 80);
        space.release(a, 40);
        assert_eq!(space.alloc(30), Some(0), "the freed run is reused");
        space.release(0, 30);
        space.release(b, 40);
        assert_eq!(space.used(), 0);
        assert_eq!(space.alloc(100), Some(0), "runs merged back into one");
    }
}

//! Where a binary's addresses land in a process: its loadable segments,
//! and the load bias a mapping of one of them gives.
use object::{Object as _, ObjectSegment as _};

/// A binary's loadable segments: (file offset, address).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Segments(Vec<(u64, u64)>);

impl Segments {
    /// The segments of the parsed ELF file `file`.
    #[must_use]
    pub fn of(file: &object::File<'_>) -> Self {
        Self(
            file.segments()
                .map(|s| (s.file_range().0, s.address()))
                .collect(),
        )
    }

    /// One segment at file offset 0 and address 0 (a file loaded at its
    /// own addresses, for tests).
    #[cfg(test)]
    #[must_use]
    pub fn identity() -> Self {
        Self(vec![(0, 0)])
    }

    /// What to add to the file's addresses in a process that maps its
    /// file offset `offset` at `start`.
    #[must_use]
    pub fn bias(&self, offset: u64, start: u64) -> Option<u64> {
        let &(seg_offset, seg_vaddr) = self
            .0
            .iter()
            .rev()
            .find(|&&(seg_offset, _)| seg_offset <= offset)?;
        let vaddr = seg_vaddr + (offset - seg_offset);
        Some(start.wrapping_sub(vaddr))
    }
}

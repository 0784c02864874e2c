//! Where binaries' tables go in the kernel's row array, and which
//! binaries are dropped to make room or to stay within a bound.
use std::time::Instant;

use super::{Unwinder, binary::BinaryId};
use crate::bpf::UnwindMaps;
use profiler_common::{bound::least_recent, unwind::UnwindRow};

/// Binaries no process maps kept at most (for a program started again):
/// past it, the least recently used go, and their rows with them. A build
/// host maps new binaries all day; their tables would otherwise stay until
/// the row budget ran out.
const MAX_UNUSED_BINARIES: usize = 1_024;

impl Unwinder {
    /// Copies `rows` into free space of the kernel's array, evicting unused
    /// tables (least recently used first) to make room; `None` when they
    /// do not fit the budget even then.
    pub(super) fn place<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        rows: &[UnwindRow],
    ) -> Result<Option<u32>, M::Error> {
        let Ok(len) = u32::try_from(rows.len()) else {
            self.stats.tables_over_budget += 1;
            return Ok(None);
        };
        if len == 0 {
            return Ok(None);
        }
        let start = loop {
            if let Some(start) = self.space.alloc(len) {
                break start;
            }
            if !self.evict_one_unused(maps)? {
                self.stats.tables_over_budget += 1;
                return Ok(None);
            }
        };
        if let Err(e) = maps.write_rows(start, rows) {
            self.space.release(start, len);
            return Err(e);
        }
        Ok(Some(start))
    }

    /// Drops the least recently used binaries that no process maps, down
    /// to [`MAX_UNUSED_BINARIES`] of them.
    pub(super) fn bound_unused<M: UnwindMaps>(&mut self, maps: &mut M) -> Result<(), M::Error> {
        let mut unused: Vec<(Instant, BinaryId)> = self
            .binaries
            .iter()
            .filter(|(_, b)| b.users == 0)
            .map(|(id, b)| (b.last_used, id.clone()))
            .collect();
        let excess = unused.len().saturating_sub(MAX_UNUSED_BINARIES);
        for (_, id) in least_recent(&mut unused, excess) {
            self.drop_binary(maps, id)?;
        }
        Ok(())
    }

    /// Drops `id`, giving its rows back once no file points at them (a
    /// file the kernel's map kept keeps them: rows reused under it would
    /// walk a new process of that file by another binary's table).
    fn drop_binary<M: UnwindMaps>(&mut self, maps: &mut M, id: &BinaryId) -> Result<(), M::Error> {
        if let Some(binary) = self.binaries.remove(id) {
            self.stats.binaries_evicted += 1;
            Self::forget_files(maps, &binary.files)?;
            if let Some(start) = binary.first_row {
                self.space.release(start, binary.run);
            }
        }
        Ok(())
    }

    pub(super) fn evict_one_unused<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
    ) -> Result<bool, M::Error> {
        let Some(id) = self
            .binaries
            .iter()
            .filter(|(_, b)| b.users == 0 && b.first_row.is_some())
            .min_by_key(|(_, b)| b.last_used)
            .map(|(id, _)| id.clone())
        else {
            return Ok(false);
        };
        self.drop_binary(maps, &id)?;
        Ok(true)
    }
}

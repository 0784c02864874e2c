//! The tables of files, published for the walk of processes whose own
//! mappings are not published yet (`profiler_common::unwind::by_file`):
//! a binary's table is found by the file a new process maps from its first
//! sample on, without waiting for the daemon to read the process.
use profiler_common::unwind::by_file::{FileKey, FileTable};

use super::{Unwinder, binary::BinaryId};
use crate::{bpf::UnwindMaps, process::maps::Vma};

/// Files published per binary at most: copies of one binary (by build id)
/// at as many paths, or mapped at as many offsets. Past it, a copy's new
/// processes wait for their own mappings as before.
const MAX_FILES_PER_BINARY: usize = 8;

impl Unwinder {
    /// Publishes the table of the file `vma` maps, binary `id`, as the
    /// mapping was just published (its table's first row, packed size and
    /// bias), unless it is published already or has no table. A refusal
    /// (the kernel's map full) leaves the file's new processes to wait for
    /// their own mappings, and is counted.
    pub(super) fn publish_file<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        vma: &Vma,
        id: Option<&BinaryId>,
        (first_row, table, bias): (u32, u32, u64),
    ) {
        let (Some(file), Some(id)) = (vma.file, id) else {
            return;
        };
        let (Some(stamp), Some(binary)) = (id.stamp(), self.binaries.get_mut(id)) else {
            return;
        };
        let key = FileKey {
            ino: file.inode,
            size: stamp.size,
            mtime: stamp.mtime,
            offset: vma.offset,
        };
        let known = binary.files.iter().any(|(k, _)| *k == key);
        if table == 0 || known || binary.files.len() >= MAX_FILES_PER_BINARY {
            return;
        }
        let table = FileTable {
            may_wait: u32::from(binary.plain),
            ..FileTable::new(first_row, table, vma.start, bias)
        };
        if maps.set_file_table(&key, &table).is_ok() {
            binary.files.push((key, table));
        } else {
            self.stats.file_tables_refused += 1;
        }
    }

    /// Lets the new processes of `binaries` wait to be read (every runtime
    /// read them and found none of its own): their files published so far
    /// are written again, marked, and those published from now are
    /// marked as written.
    pub(super) fn let_wait<'a, M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        binaries: impl Iterator<Item = &'a BinaryId>,
    ) {
        for id in binaries {
            let Some(binary) = self.binaries.get_mut(id) else {
                continue;
            };
            if binary.plain {
                continue;
            }
            binary.plain = true;
            for (key, table) in &mut binary.files {
                table.may_wait = 1;
                // Refused (full, or gone): its processes are read at once,
                // as before.
                let _ = maps.set_file_table(key, table);
            }
        }
    }

    /// Forgets the files of a binary whose rows are given back.
    pub(super) fn forget_files<M: UnwindMaps>(
        maps: &mut M,
        files: &[(FileKey, FileTable)],
    ) -> Result<(), M::Error> {
        files
            .iter()
            .try_for_each(|(key, _)| maps.remove_file_table(key))
    }
}

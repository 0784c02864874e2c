//! Publishing one process: its mappings read (with the binary behind
//! each), then the tables it needs built and its mappings written to the
//! kernel. The two halves are apart so that serving a batch of requests
//! reads every process before it builds any table (`serving.rs`): a
//! large binary's table takes most of a second, and the processes read
//! after it may be gone by then.
use std::collections::HashSet;

use profiler_common::unwind::{MAX_MAPPINGS, ProcessMappings, UnwindMapping};

use super::{
    Identified, Process, Published, Stamped, Unwinder,
    binary::{BinaryId, binary_id, identified, stamped},
};
use crate::{
    bpf::UnwindMaps,
    cpu_time::{Laps, Step},
    process::maps::{self, Vma},
};

/// A process's executable mappings as just read, with the binary behind
/// each (as many as the kernel takes), not yet published.
pub struct Reading {
    vmas: Vec<Vma>,
    ids: Vec<Option<BinaryId>>,
}

impl Reading {
    /// Its mappings, each with the stamp of the file behind it, and its
    /// ids where they were `looked_up`.
    #[must_use]
    pub fn identified(&self, looked_up: bool) -> Vec<Identified<'_>> {
        identified(&self.vmas, &self.ids, looked_up).collect()
    }

    /// Each mapping with a binary behind it, and that binary.
    pub(super) fn files(&self) -> impl Iterator<Item = (&Vma, &BinaryId)> {
        self.vmas
            .iter()
            .zip(&self.ids)
            .filter_map(|(vma, id)| Some((vma, id.as_ref()?)))
    }
}

/// What reading a process found.
pub(super) enum Read {
    /// Mappings other than those published.
    Anew(Reading),
    /// The mappings already published.
    Unchanged,
    /// It is gone (its mappings cannot be read).
    Gone,
}

impl Unwinder {
    /// Builds what `pid` needs and publishes its mappings; a process that
    /// is gone or whose mappings did not change is left alone. `read` as
    /// in [`Unwinder::publish_read`].
    ///
    /// # Errors
    /// When the kernel maps cannot be written, or `read` fails.
    pub fn publish<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        pid: u32,
        read: &mut impl FnMut(&mut M, u32, &Stamped<'_>) -> Result<Vec<bool>, M::Error>,
    ) -> Result<Published, M::Error> {
        match self.read_anew(pid) {
            Read::Anew(reading) => {
                self.publish_read(maps, pid, reading, read)?;
                Ok(Published::Anew)
            }
            Read::Unchanged => Ok(Published::Unchanged),
            Read::Gone => Ok(Published::Gone),
        }
    }

    /// Reads `pid`'s executable mappings and the binary behind each.
    pub(super) fn read_anew(&mut self, pid: u32) -> Read {
        let mut laps = Laps::start();
        let read_vmas = maps::read(pid);
        laps.lap(Step::MapsRead);
        let Ok(vmas) = read_vmas else {
            return Read::Gone;
        };
        if self.processes.get(&pid).is_some_and(|p| p.vmas == vmas) {
            return Read::Unchanged;
        }
        let kept = vmas.len().min(MAX_MAPPINGS);
        if kept < vmas.len() {
            self.stats.publishes_over_mapping_limit += 1;
        }
        let ids = vmas[..kept]
            .iter()
            .map(|vma| {
                let build_ids = self.tables.then_some(&mut self.build_ids);
                binary_id(pid, vma, &mut self.stamps, build_ids)
            })
            .collect();
        laps.lap(Step::BinaryIds);
        Read::Anew(Reading { vmas, ids })
    }

    /// Builds the tables `reading` of `pid` needs and publishes its
    /// mappings. `read` is told its mappings, each with its file's stamp,
    /// once they are published: not before, which widened the window in
    /// which an exec between reading `/proc/PID/maps` and publishing leaves
    /// the old image published (a test of a worker that execs 50 ms in
    /// lost its stacks after the exec about once in eight runs). `read`
    /// says which mappings' files are none of any runtime's: their new
    /// processes may wait to be read.
    ///
    /// # Errors
    /// When the kernel maps cannot be written, or `read` fails.
    pub(super) fn publish_read<M: UnwindMaps>(
        &mut self,
        maps: &mut M,
        pid: u32,
        reading: Reading,
        read: &mut impl FnMut(&mut M, u32, &Stamped<'_>) -> Result<Vec<bool>, M::Error>,
    ) -> Result<(), M::Error> {
        let mut laps = Laps::start();
        let Reading { vmas, ids } = reading;
        let mut mappings = ProcessMappings {
            overflow: u32::from(ids.len() < vmas.len()),
            ..ProcessMappings::default()
        };
        let mut used = HashSet::new();
        for ((vma, id), slot) in vmas.iter().zip(&ids).zip(&mut mappings.mappings) {
            let (first_row, table, bias) = id
                .as_ref()
                .map(|id| self.table_for(maps, pid, vma, id))
                .transpose()?
                .flatten()
                .unwrap_or((0, 0, 0));
            self.publish_file(maps, vma, id.as_ref(), (first_row, table, bias));
            *slot = UnwindMapping {
                start: vma.start,
                end: vma.end,
                bias,
                first_row,
                table,
            };
            mappings.len += 1;
            used.extend(id.clone());
        }
        debug_assert!(mappings.len as usize <= MAX_MAPPINGS);
        laps.lap(Step::Tables);
        maps.set_mappings(pid, &mappings)?;
        laps.lap(Step::MappingsPublish);
        self.stats.mapping_publishes += 1;
        let plain = read(maps, pid, &stamped(&vmas, &ids).collect::<Vec<_>>())?;
        let plain = ids
            .iter()
            .zip(plain)
            .filter(|&(_, p)| p)
            .flat_map(|(id, _)| id);
        self.let_wait(maps, plain);
        laps.lap(Step::Runtimes);
        for id in &used {
            if let Some(binary) = self.binaries.get_mut(id) {
                binary.users += 1;
            }
        }
        // What the kernel saw stays until a request says otherwise.
        let seen = self.seen(pid);
        let old = self.processes.insert(
            pid,
            Process {
                vmas,
                ids,
                binaries: used,
                seen,
            },
        );
        self.release(old);
        Ok(())
    }
}

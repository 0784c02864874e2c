//! A process's mappings read while it lived (when the daemon first saw it,
//! or saw it exec), with what must be read then because the process may
//! be gone by the window's end: the build ids behind them, its name, its
//! placement, whether it shares our mount namespace, and its root.
use std::{os::unix::fs::MetadataExt as _, path::PathBuf, sync::Arc};

use profiler_common::{process::ProcessSeen, sample::comm_str};

use super::{
    build_ids::{BuildIds, FileIds},
    cgroup::Placement,
    maps::{FileStamp, Vma},
    placements::Placements,
    procfs,
    roots::{Root, Roots, Unheld},
};

/// What was read of one process while it lived.
#[derive(Debug)]
pub struct ProcessSnapshot {
    pub pid: u32,
    pub comm: Option<Arc<str>>,
    pub placement: Option<Arc<Placement>>,
    /// Its executable mappings, each with its file's build id (empty for
    /// none), or digest.
    pub vmas: Vec<(Vma, FileIds)>,
    /// Whether it saw files at the paths we see (see [`same_mount_ns`]).
    pub same_mount_ns: bool,
    /// Its root, held open, when it is not ours; then each of `vmas`'
    /// file's stamp as the process saw it (through `map_files`), which
    /// the file read through the root must match.
    pub root: Option<Arc<Root>>,
    pub stamps: Vec<Option<FileStamp>>,
    /// Why its root could not be held, when it could not.
    pub unheld: Option<Unheld>,
}

/// What snapshots share: the build ids, roots and placements read so far.
#[derive(Default)]
pub struct Known {
    pub build_ids: BuildIds,
    pub roots: Roots,
    pub placements: Placements,
}

impl ProcessSnapshot {
    /// Reads what the symbolizer needs of `pid`, whose executable mappings
    /// were just read from `/proc/PID/maps`, each with the stamp of the
    /// file behind it, which names its build id (or digest), and that
    /// build id or digest where the reader looked it up (else it is read
    /// here); what the kernel `seen` of it as it asked is taken rather
    /// than read again.
    #[must_use]
    pub fn read<'a>(
        pid: u32,
        mappings: impl Iterator<Item = (&'a Vma, Option<FileStamp>, Option<FileIds>)>,
        seen: &ProcessSeen,
        known: &mut Known,
    ) -> Self {
        let Known {
            build_ids,
            roots,
            placements,
        } = known;
        let (root, unheld) = match roots.of_seen(pid, seen) {
            Ok(root) => (root, None),
            Err(cause) => (None, Some(cause)),
        };
        let (vmas, stamps) = mappings
            .map(|(vma, stamp, ids)| {
                let ids = ids.unwrap_or_else(|| build_ids.ids_of(pid, vma, stamp));
                ((vma.clone(), ids), root.as_ref().and(stamp))
            })
            .unzip();
        let comm = match comm_str(&seen.comm) {
            [] => procfs::comm(pid, pid).map(Arc::from),
            name => Some(Arc::from(String::from_utf8_lossy(name))),
        };
        Self {
            pid,
            comm,
            placement: placements.of(pid, seen),
            vmas,
            same_mount_ns: if seen.mnt_ns == 0 {
                same_mount_ns(pid)
            } else {
                our_mount_ns() == Some(u64::from(seen.mnt_ns))
            },
            root,
            stamps,
            unheld,
        }
    }
}

/// Our mount namespace's inode number, read once: the daemon never
/// changes namespace.
fn our_mount_ns() -> Option<u64> {
    static OURS: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *OURS.get_or_init(|| std::fs::metadata("/proc/self/ns/mnt").ok().map(|m| m.ino()))
}

/// Whether `pid` is in our mount namespace, so that the paths it mapped
/// name the files we see at them.
pub(crate) fn same_mount_ns(pid: u32) -> bool {
    // Ours, read once: the daemon never changes namespace.
    static OURS: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let ours = OURS.get_or_init(|| std::fs::read_link("/proc/self/ns/mnt").ok());
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
    ours.is_some() && theirs == *ours
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::{files::read_build_id, maps};

    #[test]
    fn ids_the_reader_looked_up_are_kept_and_the_others_read() {
        let pid = std::process::id();
        let vmas = maps::read(pid).unwrap();
        let own = std::fs::read_link("/proc/self/exe").unwrap();
        let vma = vmas
            .iter()
            .find(|v| std::path::Path::new(&*v.path) == own)
            .unwrap();
        let stamp = FileStamp::of_mapping(pid, vma);
        let seen = ProcessSeen::default();
        let mut known = Known::default();
        let given = FileIds {
            build_id: Arc::from("0123"),
            digest: None,
        };
        let mappings = [(vma, stamp, Some(given.clone()))];
        let snapshot = ProcessSnapshot::read(pid, mappings.into_iter(), &seen, &mut known);
        assert_eq!(snapshot.vmas[0].1, given);
        assert_eq!(known.build_ids.reads(), 0, "nothing read again");

        let snapshot =
            ProcessSnapshot::read(pid, [(vma, stamp, None)].into_iter(), &seen, &mut known);
        assert_eq!(known.build_ids.reads(), 1);
        let read = read_build_id(pid, vma).unwrap();
        assert_eq!(&*snapshot.vmas[0].1.build_id, read.as_str());
    }
}

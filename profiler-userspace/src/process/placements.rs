//! Placements remembered by cgroup: a build host starts hundreds of
//! processes a second in a handful of cgroups, and the kernel says which
//! each is in as it asks for its mappings (`ProcessSeen::cgroup`), so
//! `/proc/PID/cgroup` is read once per cgroup rather than per process.
//!
//! Only where a cgroup id names one placement: a host whose processes are
//! in the unified (v2) hierarchy alone (v1 hierarchies add lines the id
//! does not tell), and a cgroup whose directory is the id the process was
//! asked in (it may have moved between the ask and the read: then it is
//! read, not remembered).
use std::{
    collections::HashMap,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    sync::Arc,
};

use super::cgroup::{self, Placement};

/// Most cgroups remembered; past it, the memory starts over.
const MAX_KNOWN: usize = profiler_common::bound::MEMO_ENTRIES;

/// Placements by cgroup id.
#[derive(Debug)]
pub struct Placements {
    /// Where the unified hierarchy is mounted, on a host whose processes
    /// are in it alone; `None` elsewhere (every placement is read).
    unified: Option<PathBuf>,
    known: HashMap<u64, Arc<Placement>>,
    /// Files read, ever (the others came from memory).
    reads: u64,
}

impl Default for Placements {
    /// As this host allows: remembered where the daemon's own
    /// `/proc/self/cgroup` is one `0::` line (the unified hierarchy alone,
    /// mounted at `/sys/fs/cgroup`).
    fn default() -> Self {
        let unified = std::fs::read_to_string("/proc/self/cgroup").is_ok_and(|text| {
            let mut lines = text.lines();
            lines.next().is_some_and(|l| l.starts_with("0::")) && lines.next().is_none()
        });
        Self::unified_at(unified.then(|| PathBuf::from("/sys/fs/cgroup")))
    }
}

impl Placements {
    /// Remembered by the ids of the unified hierarchy mounted at `mount`
    /// (none: never).
    fn unified_at(mount: Option<PathBuf>) -> Self {
        Self {
            unified: mount,
            known: HashMap::new(),
            reads: 0,
        }
    }

    /// The placement of `pid`, which the kernel saw in cgroup `id` (0:
    /// unknown); `None` when it is gone.
    pub fn of(&mut self, pid: u32, id: u64) -> Option<Arc<Placement>> {
        let mount = self.unified.as_deref().filter(|_| id != 0);
        if let Some(known) = self.known.get(&id).filter(|_| mount.is_some()) {
            return Some(Arc::clone(known));
        }
        self.reads += 1;
        let placement = Arc::new(cgroup::read(pid)?);
        if mount.is_some_and(|mount| directory_id(mount, &placement.cgroup) == Some(id)) {
            if self.known.len() >= MAX_KNOWN {
                self.known.clear();
            }
            self.known.insert(id, Arc::clone(&placement));
        }
        Some(placement)
    }

    /// Files read so far.
    #[cfg(test)]
    #[must_use]
    pub fn reads(&self) -> u64 {
        self.reads
    }
}

/// The id of the cgroup at `path` under `mount` (the inode number of its
/// directory, which is the id on 64-bit kernels).
fn directory_id(mount: &Path, path: &str) -> Option<u64> {
    let dir = mount.join(path.trim_start_matches('/'));
    std::fs::metadata(dir).ok().map(|meta| meta.ino())
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Command};

    use super::*;

    /// The unified hierarchy on this host (alone or beside v1 ones).
    fn unified_mount() -> PathBuf {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        let mount = mounts
            .lines()
            .map(|l| l.split(' ').collect::<Vec<_>>())
            .find(|f| f.get(2) == Some(&"cgroup2"))
            .expect("a cgroup2 mount");
        PathBuf::from(mount[1])
    }

    /// A cgroup of its own, with a process in it, removed at the end.
    struct Cgroup {
        dir: PathBuf,
        child: Child,
    }

    impl Cgroup {
        fn new(mount: &Path, name: &str) -> Self {
            let dir = mount.join(format!("profiler-placements-{}-{name}", std::process::id()));
            std::fs::create_dir(&dir).unwrap();
            let child = Command::new("sleep").arg("30").spawn().unwrap();
            std::fs::write(dir.join("cgroup.procs"), child.id().to_string()).unwrap();
            Self { dir, child }
        }

        fn id(&self) -> u64 {
            std::fs::metadata(&self.dir).unwrap().ino()
        }
    }

    impl Drop for Cgroup {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = std::fs::remove_dir(&self.dir);
        }
    }

    #[test]
    fn a_cgroup_is_read_once_when_its_id_names_it() {
        let mount = unified_mount();
        let (a, b) = (Cgroup::new(&mount, "a"), Cgroup::new(&mount, "b"));
        let mut placements = Placements::unified_at(Some(mount));
        let first = placements.of(a.child.id(), a.id()).unwrap();
        assert!(first.cgroup.ends_with("-a"), "{first:?}");
        assert_eq!(*first, cgroup::read(a.child.id()).unwrap());
        assert_eq!(placements.of(a.child.id(), a.id()).unwrap(), first);
        assert_eq!(placements.reads(), 1, "the second from memory");
        // Another cgroup is read, and remembered under its own id.
        let other = placements.of(b.child.id(), b.id()).unwrap();
        assert!(other.cgroup.ends_with("-b"), "{other:?}");
        assert_eq!(placements.reads(), 2);
    }

    #[test]
    fn an_id_that_is_not_the_processs_cgroup_is_not_remembered() {
        let mount = unified_mount();
        let (a, b) = (Cgroup::new(&mount, "c"), Cgroup::new(&mount, "d"));
        let mut placements = Placements::unified_at(Some(mount));
        // `a`'s process asked in `b`, then moved: read, not remembered
        // under `b`'s id.
        let read = placements.of(a.child.id(), b.id()).unwrap();
        assert!(read.cgroup.ends_with("-c"), "{read:?}");
        let again = placements.of(b.child.id(), b.id()).unwrap();
        assert!(again.cgroup.ends_with("-d"), "{again:?}");
        assert_eq!(placements.reads(), 2);
        // Unknown id, or a host with v1 hierarchies: read every time.
        placements.of(a.child.id(), 0).unwrap();
        let mut hybrid = Placements::unified_at(None);
        hybrid.of(a.child.id(), a.id()).unwrap();
        hybrid.of(a.child.id(), a.id()).unwrap();
        assert_eq!((placements.reads(), hybrid.reads()), (3, 2));
    }
}

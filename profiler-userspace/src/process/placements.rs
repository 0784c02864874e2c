//! Placements remembered: a build host starts hundreds of processes a
//! second in a handful of cgroups, and the kernel says which each is in as
//! it asks for its mappings ([`ProcessSeen`]), so `/proc/PID/cgroup` is
//! read once per cgroup rather than per process.
//!
//! - On a host whose processes are in the unified (v2) hierarchy alone, by
//!   cgroup id, where the cgroup's directory is the id the process was
//!   asked in (it may have moved between the ask and the read: then it is
//!   read, not remembered).
//! - Where v1 hierarchies add lines the id does not tell (hybrid and v1
//!   hosts, where a read takes about 10 µs with ten hierarchies), by the
//!   process's set of cgroups: the kernel's `css_set`, shared by every
//!   task forked from one until a task moves, with its unified cgroup id
//!   and its controllers' cgroups (a hash of them). A set is made anew (at
//!   an address a freed one may have had) by a move, which the kernel
//!   counts (`cgroup_moves`), or by a clone into another unified cgroup,
//!   which the unified id tells, with the parent's controllers' cgroups,
//!   which the hash tells. So what is remembered holds while the count
//!   stays: the reads and lookups of a batch
//!   ([`Placements::begin`] to [`Placements::end`]) count for it only when
//!   the count was the same at the process's ask, the batch's start and
//!   its end, and the answers a batch gave from memory are read again when
//!   it was not.
use std::{
    collections::HashMap,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    sync::Arc,
};

use profiler_common::process::ProcessSeen;

use super::cgroup::{self, Placement};

/// Most cgroups (or sets) remembered; past it, the memory starts over.
const MAX_KNOWN: usize = profiler_common::bound::MEMO_ENTRIES;

/// Placements by cgroup id, or by set of cgroups.
#[derive(Debug)]
pub struct Placements {
    /// Where the unified hierarchy is mounted, on a host whose processes
    /// are in it alone; `None` elsewhere (remembered by set).
    unified: Option<PathBuf>,
    known: HashMap<u64, Arc<Placement>>,
    /// By `(css_set, unified cgroup id, controllers' cgroups)`, as of
    /// `moves`.
    by_set: HashMap<(u64, u64, u64), Arc<Placement>>,
    /// The kernel's count of moves in the batch under way (`None`: not
    /// known, nothing is remembered by set).
    moves: Option<u64>,
    /// The processes of the batch under way answered from `by_set`.
    remembered: Vec<u32>,
    /// Files read, ever (the others came from memory).
    reads: u64,
}

impl Default for Placements {
    /// As this host allows: remembered by id where the daemon's own
    /// `/proc/self/cgroup` is one `0::` line (the unified hierarchy alone,
    /// mounted at `/sys/fs/cgroup`), else by set.
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
    /// (none: by set).
    fn unified_at(mount: Option<PathBuf>) -> Self {
        Self {
            unified: mount,
            known: HashMap::new(),
            by_set: HashMap::new(),
            moves: None,
            remembered: Vec::new(),
            reads: 0,
        }
    }

    /// Whether placements are remembered by set of cgroups, so that a batch
    /// needs the kernel's count of moves (not on a host with the unified
    /// hierarchy alone).
    #[must_use]
    pub fn by_set(&self) -> bool {
        self.unified.is_none()
    }

    /// A batch of lookups starts, the kernel's count of moves `moves`
    /// (`None`: unknown).
    pub fn begin(&mut self, moves: Option<u64>) {
        if moves != self.moves {
            self.by_set.clear();
        }
        self.moves = moves;
        self.remembered.clear();
    }

    /// The batch ends, the kernel's count of moves `moves`: the processes
    /// answered from memory whose answers must be read again (a move
    /// during the batch; what it remembered is forgotten).
    pub fn end(&mut self, moves: Option<u64>) -> Vec<u32> {
        let remembered = std::mem::take(&mut self.remembered);
        if moves.is_some() && moves == self.moves {
            return Vec::new();
        }
        self.by_set.clear();
        self.moves = None;
        remembered
    }

    /// The placement of `pid`, which the kernel `seen` as it asked;
    /// `None` when it is gone.
    pub fn of(&mut self, pid: u32, seen: &ProcessSeen) -> Option<Arc<Placement>> {
        if self.unified.is_some() {
            return self.of_unified(pid, seen.cgroup);
        }
        let key = (seen.css_set, seen.cgroup, seen.cgroup_subsys);
        let by_set = seen.css_set != 0 && self.moves == Some(seen.cgroup_moves);
        if let Some(known) = self.by_set.get(&key).filter(|_| by_set) {
            self.remembered.push(pid);
            return Some(Arc::clone(known));
        }
        let placement = self.read(pid)?;
        if by_set {
            if self.by_set.len() >= MAX_KNOWN {
                self.by_set.clear();
            }
            self.by_set.insert(key, Arc::clone(&placement));
        }
        Some(placement)
    }

    /// The placement of `pid` as `/proc` says now; `None` when it is gone.
    pub fn read(&mut self, pid: u32) -> Option<Arc<Placement>> {
        self.reads += 1;
        cgroup::read(pid).map(Arc::new)
    }

    /// The placement of `pid`, which the kernel saw in cgroup `id` of the
    /// unified hierarchy (0: unknown).
    fn of_unified(&mut self, pid: u32, id: u64) -> Option<Arc<Placement>> {
        let remember = id != 0;
        if let Some(known) = self.known.get(&id).filter(|_| remember) {
            return Some(Arc::clone(known));
        }
        let placement = self.read(pid)?;
        let mount = self.unified.as_deref().filter(|_| remember);
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

    /// What the kernel saw of a process that asked in cgroup `id`.
    fn asked_in(id: u64) -> ProcessSeen {
        ProcessSeen {
            cgroup: id,
            ..ProcessSeen::default()
        }
    }

    #[test]
    fn a_cgroup_is_read_once_when_its_id_names_it() {
        let mount = unified_mount();
        let (a, b) = (Cgroup::new(&mount, "a"), Cgroup::new(&mount, "b"));
        let mut placements = Placements::unified_at(Some(mount));
        let first = placements.of(a.child.id(), &asked_in(a.id())).unwrap();
        assert!(first.cgroup.ends_with("-a"), "{first:?}");
        assert_eq!(*first, cgroup::read(a.child.id()).unwrap());
        assert_eq!(
            placements.of(a.child.id(), &asked_in(a.id())).unwrap(),
            first
        );
        assert_eq!(placements.reads(), 1, "the second from memory");
        // Another cgroup is read, and remembered under its own id.
        let other = placements.of(b.child.id(), &asked_in(b.id())).unwrap();
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
        let read = placements.of(a.child.id(), &asked_in(b.id())).unwrap();
        assert!(read.cgroup.ends_with("-c"), "{read:?}");
        let again = placements.of(b.child.id(), &asked_in(b.id())).unwrap();
        assert!(again.cgroup.ends_with("-d"), "{again:?}");
        assert_eq!(placements.reads(), 2);
        // Unknown id, or a host with v1 hierarchies and no set seen: read
        // every time.
        placements.of(a.child.id(), &asked_in(0)).unwrap();
        let mut hybrid = Placements::unified_at(None);
        hybrid.of(a.child.id(), &asked_in(a.id())).unwrap();
        hybrid.of(a.child.id(), &asked_in(a.id())).unwrap();
        assert_eq!((placements.reads(), hybrid.reads()), (3, 2));
    }

    #[test]
    fn a_set_of_cgroups_is_read_once_while_no_task_moves() {
        let pid = std::process::id();
        let seen = |css_set, cgroup_moves| ProcessSeen {
            cgroup: 7,
            css_set,
            cgroup_moves,
            ..ProcessSeen::default()
        };
        let mut placements = Placements::unified_at(None);
        placements.begin(Some(5));
        let first = placements.of(pid, &seen(0x1000, 5)).unwrap();
        assert_eq!(*first, cgroup::read(pid).unwrap());
        // The same set, in the same count of moves: from memory.
        assert_eq!(placements.of(pid, &seen(0x1000, 5)).unwrap(), first);
        assert_eq!(placements.reads(), 1);
        // Another set; a process that asked before a move; no set seen.
        placements.of(pid, &seen(0x2000, 5)).unwrap();
        placements.of(pid, &seen(0x1000, 4)).unwrap();
        placements.of(pid, &seen(0, 5)).unwrap();
        assert_eq!(placements.reads(), 4);
        assert_eq!(placements.end(Some(5)), Vec::<u32>::new());
        // A move since: what was remembered is forgotten.
        placements.begin(Some(6));
        placements.of(pid, &seen(0x1000, 6)).unwrap();
        assert_eq!(placements.reads(), 5);
        // A move during a batch: its answers from memory are to be read
        // again, and nothing it remembered is kept.
        placements.begin(Some(6));
        placements.of(pid, &seen(0x1000, 6)).unwrap();
        placements.of(pid, &seen(0x3000, 6)).unwrap();
        assert_eq!(placements.reads(), 6);
        assert_eq!(placements.end(Some(7)), vec![pid]);
        placements.begin(Some(7));
        placements.of(pid, &seen(0x3000, 7)).unwrap();
        assert_eq!(placements.reads(), 7);
        // The count unknown: read every time.
        placements.begin(None);
        placements.of(pid, &seen(0x3000, 0)).unwrap();
        placements.of(pid, &seen(0x3000, 0)).unwrap();
        assert_eq!(placements.reads(), 9);
    }
}

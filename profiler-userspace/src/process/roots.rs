//! Processes' roots, held open: a process in another mount namespace, or
//! chrooted, maps files at paths that mean something else on the host.
//! At first sight of a root the daemon keeps an `O_PATH` handle on it
//! (`/proc/PID/root`), so that a file the process mapped can be opened as
//! it saw it after the process is gone, through
//! `/proc/self/fd/HANDLE/PATH` (with the same build-id or device-and-inode
//! check as any path). One handle per distinct root, shared by whatever
//! needs it, and closed when nothing does. A root that could not be held
//! is an [`Unheld`] cause: that process's files are then read only by
//! path, where the host's file must match the mapping's build id or inode,
//! and otherwise keep their addresses.
use std::{
    collections::HashMap,
    fs::File,
    io,
    os::{
        fd::{AsRawFd as _, OwnedFd},
        unix::fs::{MetadataExt as _, OpenOptionsExt as _},
    },
    path::{Path, PathBuf},
    sync::{Arc, OnceLock, Weak},
};

use profiler_common::process::{ProcessSeen, RootSeen, kernel_dev, user_dev};

/// What tells roots apart: the mount namespace, and the root directory
/// in it (a chroot is another root in the same namespace).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct RootKey {
    mount_ns: u64,
    dev: u64,
    ino: u64,
}

impl RootKey {
    /// As the kernel saw it when the process asked for its mappings, when
    /// it could read it.
    fn seen(seen: &ProcessSeen) -> Option<Self> {
        (seen.mnt_ns != 0 && seen.root_ino != 0).then(|| Self {
            mount_ns: u64::from(seen.mnt_ns),
            dev: user_dev(seen.root_dev),
            ino: seen.root_ino,
        })
    }

    /// Ours, read once: the daemon never changes namespace or root.
    fn ours() -> Option<Self> {
        static OURS: OnceLock<Option<RootKey>> = OnceLock::new();
        *OURS.get_or_init(|| RootKey::of(std::process::id()).ok())
    }

    fn of(pid: u32) -> io::Result<Self> {
        let ns = std::fs::metadata(format!("/proc/{pid}/ns/mnt"))?;
        let root = std::fs::metadata(format!("/proc/{pid}/root/"))?;
        Ok(Self {
            mount_ns: ns.ino(),
            dev: root.dev(),
            ino: root.ino(),
        })
    }
}

/// Whether the process the kernel `seen` sees files at the paths we see
/// them (our mount namespace and root); false when the kernel could not
/// tell.
#[must_use]
pub fn seen_as_ours(seen: &ProcessSeen) -> bool {
    RootKey::seen(seen).is_some_and(|key| RootKey::ours() == Some(key))
}

/// Ours as the kernel records a process's (zeros when not known), for the
/// kernel to tell which requests may wait ([`ProcessSeen::deferrable`]).
#[must_use]
pub fn ours_as_seen() -> RootSeen {
    RootKey::ours().map_or_else(RootSeen::default, |key| RootSeen {
        root_ino: key.ino,
        root_dev: kernel_dev(key.dev),
        mnt_ns: u32::try_from(key.mount_ns).unwrap_or(0),
    })
}

/// Why a process's root could not be held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unheld {
    /// The process was gone before its root was opened (it had just been
    /// read: it exited in between).
    Gone,
    /// Not allowed (another user namespace's `/proc`, a security module).
    Denied,
    /// Any other failure.
    Other,
}

impl Unheld {
    pub const ALL: [Self; 3] = [Self::Gone, Self::Denied, Self::Other];

    fn of(err: &io::Error) -> Self {
        match err.raw_os_error() {
            Some(libc::ENOENT | libc::ESRCH) => Self::Gone,
            Some(libc::EACCES | libc::EPERM) => Self::Denied,
            _ => Self::Other,
        }
    }

    /// Its counter in the profile's comments and `/metrics`.
    #[must_use]
    pub const fn counter(self) -> &'static str {
        match self {
            Self::Gone => "process_roots_unheld_gone",
            Self::Denied => "process_roots_unheld_denied",
            Self::Other => "process_roots_unheld_other",
        }
    }

    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// A process's root, held open.
#[derive(Debug)]
pub struct Root {
    handle: OwnedFd,
    /// Where the root is, in the terms `/proc/PID/maps` names files in
    /// (`/proc/PID/root`'s link: the path in the process's mount
    /// namespace, `/` unless it is chrooted).
    at: PathBuf,
}

impl Root {
    /// Where the file a mapping names `path` is read through this root;
    /// `None` for a path outside it.
    #[must_use]
    pub fn path_of(&self, path: &str) -> Option<PathBuf> {
        let inside = Path::new(path).strip_prefix(&self.at).ok()?;
        Some(Path::new(&format!("/proc/self/fd/{}", self.handle.as_raw_fd())).join(inside))
    }
}

/// The roots held open, by what tells them apart; each is closed when
/// the last holder of its [`Arc`] drops it.
#[derive(Debug, Default)]
pub struct Roots {
    held: HashMap<RootKey, Weak<Root>>,
}

impl Roots {
    /// `pid`'s root, held open, when it is not the daemon's own (then
    /// `None`); `pid` was just read, so a failure is that process's.
    ///
    /// # Errors
    /// Why its root could not be held.
    pub fn of(&mut self, pid: u32) -> Result<Option<Arc<Root>>, Unheld> {
        let key = RootKey::of(pid).map_err(|e| Unheld::of(&e))?;
        self.of_key(pid, key)
    }

    /// As [`Roots::of`], by what the kernel saw of `pid` when it asked for
    /// its mappings where it could read it (two `stat`s of `/proc` fewer
    /// per process).
    ///
    /// # Errors
    /// Why its root could not be held.
    pub fn of_seen(&mut self, pid: u32, seen: &ProcessSeen) -> Result<Option<Arc<Root>>, Unheld> {
        match RootKey::seen(seen) {
            Some(key) => self.of_key(pid, key),
            None => self.of(pid),
        }
    }

    fn of_key(&mut self, pid: u32, key: RootKey) -> Result<Option<Arc<Root>>, Unheld> {
        if RootKey::ours() == Some(key) {
            return Ok(None);
        }
        if let Some(root) = self.held.get(&key).and_then(Weak::upgrade) {
            return Ok(Some(root));
        }
        let root = Self::open(pid).map_err(|e| Unheld::of(&e))?;
        self.held.retain(|_, held| held.strong_count() > 0);
        self.held.insert(key, Arc::downgrade(&root));
        Ok(Some(root))
    }

    fn open(pid: u32) -> io::Result<Arc<Root>> {
        let handle = File::options()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(format!("/proc/{pid}/root/"))?;
        let at = std::fs::read_link(format!("/proc/{pid}/root"))?;
        Ok(Arc::new(Root {
            handle: handle.into(),
            at,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemons_own_root_is_not_held() {
        assert!(Roots::default().of(std::process::id()).unwrap().is_none());
    }

    #[test]
    fn a_gone_process_root_is_unheld_as_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(Roots::default().of(pid).unwrap_err(), Unheld::Gone);
    }

    #[test]
    fn causes_are_told_apart_by_errno() {
        let cause = |errno| Unheld::of(&io::Error::from_raw_os_error(errno));
        assert_eq!(cause(libc::ESRCH), Unheld::Gone);
        assert_eq!(cause(libc::EACCES), Unheld::Denied);
        assert_eq!(cause(libc::EPERM), Unheld::Denied);
        assert_eq!(cause(libc::ELOOP), Unheld::Other);
        let names: Vec<_> = Unheld::ALL.iter().map(|u| u.counter()).collect();
        assert_eq!(names.len(), 3);
        assert!(Unheld::ALL.iter().enumerate().all(|(i, u)| u.index() == i));
    }

    #[test]
    fn a_chrooted_process_root_is_held_and_reads_its_files_after_it_exits() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/marker"), "inside").unwrap();
        let busybox = Path::new("/bin/busybox");
        assert!(
            busybox.exists(),
            "/bin/busybox is needed (apt install busybox-static; .ci/run does)"
        );
        std::fs::copy(busybox, dir.path().join("bin/busybox")).unwrap();
        let mut child = std::process::Command::new("chroot")
            .arg(dir.path())
            .args(["/bin/busybox", "sleep", "5"])
            .spawn()
            .expect("chroot (root only)");
        let pid = child.id();
        let mut roots = Roots::default();
        let mut root = None;
        for _ in 0..100 {
            // The chroot takes effect once the child has run it.
            let marker = dir.path().join("bin/marker");
            root = roots.of(pid).ok().flatten().filter(|r| {
                r.path_of(marker.to_str().unwrap())
                    .is_some_and(|p| p.exists())
            });
            if root.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let root = root.expect("the chrooted child's root");
        let again = roots.of(pid).unwrap().unwrap();
        assert!(Arc::ptr_eq(&root, &again), "one handle per root");
        child.kill().unwrap();
        child.wait().unwrap();
        // The maps of a chrooted process in our namespace name its files
        // by their whole path.
        let marker = root
            .path_of(dir.path().join("bin/marker").to_str().unwrap())
            .unwrap();
        assert_eq!(std::fs::read_to_string(marker).unwrap(), "inside");
        assert_eq!(root.path_of("/etc/passwd"), None, "outside the root");
    }
}

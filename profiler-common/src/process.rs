//! What the kernel reads of a process when it first asks the daemon for
//! its mappings (the value of [`crate::maps::UNWIND_REQUESTS`]): read in
//! the process's own context, at no cost to it beyond a few loads, so the
//! daemon need not read `/proc` for its name, cgroup, mount namespace and
//! root (four files, about 50 µs of its CPU per process on a build host).

/// A process as its own thread saw it when it asked; zero fields are
/// unknown (the daemon reads `/proc` for them).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessSeen {
    /// Its cgroup's id in the unified hierarchy (`bpf_get_current_cgroup_id`:
    /// the cgroup directory's inode number).
    pub cgroup: u64,
    /// The inode number of its root directory (`fs->root`).
    pub root_ino: u64,
    /// The device of its root directory's file system, as the kernel
    /// encodes it (`MAJOR << 20 | MINOR`).
    pub root_dev: u32,
    /// Its mount namespace's inode number (`/proc/PID/ns/mnt` names it).
    pub mnt_ns: u32,
    /// Its name, when the thread that asked was its leader (empty when
    /// another thread asked: a thread may be named otherwise).
    pub comm: [u8; 16],
    /// The address of its set of cgroups, one per hierarchy (`task->cgroups`,
    /// a `css_set` every task forked from it shares until one moves): on a
    /// host with v1 hierarchies, what its placement is remembered by.
    pub css_set: u64,
    /// How many times tasks had moved between cgroups when it asked
    /// ([`crate::maps::CGROUP_MOVES`]): a `css_set` is made anew, at an
    /// address one freed may have had, only by a move.
    pub cgroup_moves: u64,
    /// A hash ([`crate::hash`]) of the set's cgroup in each controller's
    /// hierarchy (its `subsys` pointers, at most [`MAX_CSS_SUBSYS`]): a set
    /// made without a counted move (a clone into another unified cgroup)
    /// at a freed set's address is told apart by its controllers' cgroups
    /// too.
    pub cgroup_subsys: u64,
    /// Non-zero when the walk that asked unwound every frame it met
    /// outside the published mappings by a table published for that
    /// frame's file, each a file whose processes may wait
    /// ([`crate::unwind::by_file::FileTable::may_wait`]): nothing is
    /// missing but the process's own mappings,
    /// and the daemon may wait to see whether the process lives on
    /// before it reads them (most of a build's processes do not). Such a
    /// request does not ring: the daemon's next poll takes it.
    pub deferrable: u32,
    /// Non-zero once the process has exited (its leader did), set on the
    /// request still waiting: the daemon takes its name and placement
    /// from the request, and reads nothing.
    pub exited: u32,
}

/// A walk's reason to ask for its process's mappings: a frame's file had
/// no table published (or the frame no file): the daemon reads them at
/// once.
pub const ASK_NOW: u32 = 1;
/// A walk's reason to ask: frames outside the published mappings, each
/// unwound by the table of a file whose processes may wait
/// ([`ProcessSeen::deferrable`]).
pub const ASK_LATER: u32 = 2;

/// Controllers' pointers of a `css_set` hashed at most (the kernel has
/// fifteen controllers at most today).
pub const MAX_CSS_SUBSYS: u32 = 16;

#[cfg(feature = "user")]
// SAFETY: plain integers and bytes, no padding (8 + 8 + 4 + 4 + 16 + 8 +
// 8 + 8 + 4 + 4), every bit pattern valid.
unsafe impl aya::Pod for ProcessSeen {}

/// A mount namespace and root as [`ProcessSeen`] records a process's: the
/// daemon's own, which a process must share for its request to wait
/// ([`ProcessSeen::deferrable`]): the kernel's records name a file by the
/// path the process saw, which is ours only in our namespace and root.
/// All zero when unknown (then no request waits).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RootSeen {
    pub root_ino: u64,
    pub root_dev: u32,
    pub mnt_ns: u32,
}

#[cfg(feature = "user")]
// SAFETY: 8 + 4 + 4 bytes of integers, no padding, every bit pattern valid.
unsafe impl aya::Pod for RootSeen {}

impl RootSeen {
    /// Whether `seen` records this namespace and root; false when either
    /// is unknown.
    #[must_use]
    pub fn is_of(&self, seen: &ProcessSeen) -> bool {
        self.mnt_ns != 0
            && self.root_ino != 0
            && (self.root_ino, self.root_dev, self.mnt_ns)
                == (seen.root_ino, seen.root_dev, seen.mnt_ns)
    }
}

/// Byte offsets of the fields [`ProcessSeen`] is read from, resolved from
/// `/sys/kernel/btf/vmlinux`; all zero when unknown (nothing is read).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessOffsets {
    /// `task_struct.nsproxy`.
    pub nsproxy: u32,
    /// `nsproxy.mnt_ns`.
    pub mnt_ns: u32,
    /// `mnt_namespace.ns.inum`.
    pub ns_inum: u32,
    /// `task_struct.fs`.
    pub fs: u32,
    /// `fs_struct.root.dentry`.
    pub root_dentry: u32,
    /// `dentry.d_inode`.
    pub d_inode: u32,
    /// `inode.i_ino`.
    pub i_ino: u32,
    /// `dentry.d_sb`.
    pub d_sb: u32,
    /// `super_block.s_dev`.
    pub s_dev: u32,
    /// `task_struct.cgroups`.
    pub cgroups: u32,
    /// `css_set.subsys`, and how many pointers it holds (0: not read).
    pub css_subsys: u32,
    pub css_subsys_len: u32,
}

#[cfg(feature = "user")]
// SAFETY: twelve u32s, no padding, every bit pattern valid.
unsafe impl aya::Pod for ProcessOffsets {}

impl ProcessOffsets {
    /// Whether the offsets were resolved.
    #[must_use]
    pub fn known(&self) -> bool {
        self.nsproxy != 0 && self.fs != 0
    }
}

/// The user-space encoding (`st_dev`, `makedev`) of a device number the
/// kernel encodes as `MAJOR << 20 | MINOR` ([`ProcessSeen::root_dev`]).
#[must_use]
pub fn user_dev(kernel_dev: u32) -> u64 {
    let major = u64::from(kernel_dev >> 20);
    let minor = u64::from(kernel_dev & 0xf_ffff);
    // glibc's makedev.
    ((major & 0xffff_f000) << 32)
        | ((major & 0xfff) << 8)
        | ((minor & 0xffff_ff00) << 12)
        | (minor & 0xff)
}

/// The kernel's encoding (`MAJOR << 20 | MINOR`) of a user-space device
/// number: the inverse of [`user_dev`].
#[must_use]
pub fn kernel_dev(user_dev: u64) -> u32 {
    // glibc's major and minor.
    let major = ((user_dev >> 32) & 0xffff_f000) | ((user_dev >> 8) & 0xfff);
    let minor = ((user_dev >> 12) & 0xffff_ff00) | (user_dev & 0xff);
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the kernel keeps 12 bits of major and 20 of minor"
    )]
    let dev = ((major << 20) | (minor & 0xf_ffff)) as u32;
    dev
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_device_numbers_read_as_stat_gives_them() {
        // 8:1 (sda1), 259:3 (nvme0n1p3), 0:34 (an overlay), 253:300 (as
        // Python's os.makedev gives them).
        assert_eq!(user_dev((8 << 20) | 1), 0x801);
        assert_eq!(user_dev((259 << 20) | 3), 0x10303);
        assert_eq!(user_dev(34), 0x22);
        assert_eq!(user_dev((253 << 20) | 0x12c), 0x0010_fd2c);
        for kernel in [(8 << 20) | 1, (259 << 20) | 3, 34, (253 << 20) | 0x12c] {
            assert_eq!(kernel_dev(user_dev(kernel)), kernel);
        }
    }
}

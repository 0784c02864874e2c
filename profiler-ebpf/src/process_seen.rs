//! What the current process's own thread sees of it when it asks the
//! daemon for its mappings ([`ProcessSeen`]): its cgroup (and set of
//! cgroups), name, mount namespace and root, so the daemon need not read
//! four `/proc` files for each new process. Also the kernel's count of
//! moves between cgroups, which tasks' moves bump ([`moved`]).
use aya_ebpf::helpers::{
    bpf_get_current_pid_tgid,
    generated::{bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_task_btf},
};
use profiler_common::{
    hash,
    process::{MAX_CSS_SUBSYS, ProcessOffsets, ProcessSeen},
};

use crate::{fields::read, maps};

/// Fills `seen` (zeroed) with the current process as its thread sees it,
/// when it is process `pid` (nothing is read otherwise).
#[inline(always)]
pub fn current(pid: u32, seen: &mut ProcessSeen) {
    let pid_tgid = bpf_get_current_pid_tgid();
    if (pid_tgid >> 32) as u32 != pid {
        return;
    }
    #[expect(clippy::cast_possible_truncation, reason = "the low half is the tid")]
    let tid = pid_tgid as u32;
    // Before the set of cgroups: a move between them is counted after the
    // task has moved.
    seen.cgroup_moves = maps::cgroup_moves();
    // SAFETY: a helper without arguments, allowed in every tracing program.
    seen.cgroup = unsafe { bpf_get_current_cgroup_id() };
    if tid == pid {
        // SAFETY: the buffer is `seen.comm`, 16 writable bytes.
        unsafe { bpf_get_current_comm(seen.comm.as_mut_ptr().cast(), 16) };
    }
    let offsets = maps::process_offsets();
    if offsets.known() {
        read_task(&offsets, seen);
    }
}

/// Tasks moved between cgroups, or a cgroup was renamed: the sets of
/// cgroups the daemon knows by address may have changed.
#[inline(always)]
pub fn moved() {
    maps::count_cgroup_move();
}

/// The set of cgroups, mount namespace and root of the current task.
#[inline(always)]
fn read_task(at: &ProcessOffsets, seen: &mut ProcessSeen) {
    // SAFETY: the helper returns the current task, valid for this run.
    let task = unsafe { bpf_get_current_task_btf() } as u64;
    if at.cgroups != 0 {
        seen.css_set = pointer(task, at.cgroups);
        seen.cgroup_subsys = subsys_hash(seen.css_set, at);
    }
    let nsproxy = pointer(task, at.nsproxy);
    let mnt_ns = pointer(nsproxy, at.mnt_ns);
    seen.mnt_ns = read::<u32>(mnt_ns, at.ns_inum);
    let fs = pointer(task, at.fs);
    let dentry = pointer(fs, at.root_dentry);
    seen.root_ino = read::<u64>(pointer(dentry, at.d_inode), at.i_ino);
    seen.root_dev = read::<u32>(pointer(dentry, at.d_sb), at.s_dev);
}

/// The hash of the cgroup of each controller `set` (a `css_set`) holds:
/// its `subsys` pointers.
#[inline(always)]
fn subsys_hash(set: u64, at: &ProcessOffsets) -> u64 {
    let mut mixed = 0;
    for i in 0..MAX_CSS_SUBSYS {
        if i >= at.css_subsys_len {
            break;
        }
        mixed = hash::mix(mixed, pointer(set, at.css_subsys + i * 8));
    }
    hash::finish(mixed)
}

/// The pointer at `base + offset` (0 when `base` is 0 or unreadable).
#[inline(always)]
fn pointer(base: u64, offset: u32) -> u64 {
    read::<u64>(base, offset)
}

//! Reading the kernel's per-thread off-CPU state from userspace. `TASKS`
//! is task storage (a value off each thread's `task_struct`), which cannot
//! be iterated and which aya 0.14 loads but does not wrap: a thread's value
//! is looked up with the `bpf(2)` system call, keyed by a pidfd of the
//! thread.
use std::{
    io,
    os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd},
};

use profiler_common::task::TaskState;

/// `PIDFD_THREAD` (Linux 6.9): a pidfd for a thread rather than a process.
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

/// `BPF_MAP_LOOKUP_ELEM`.
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;

/// The `bpf_attr` member of the element commands.
#[repr(C)]
struct ElemAttr {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// A pidfd for thread `tid`; `None` when the thread is gone.
///
/// # Errors
/// When the kernel refuses for another reason (EINVAL: no `PIDFD_THREAD`,
/// before Linux 6.9, for any thread but a process's first).
pub fn open_thread(tid: u32) -> io::Result<Option<OwnedFd>> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_pidfd_open,
            libc::pid_t::try_from(tid).unwrap_or(-1),
            PIDFD_THREAD,
        )
    };
    if fd < 0 {
        let error = io::Error::last_os_error();
        return match error.raw_os_error() {
            Some(libc::ESRCH) => Ok(None),
            _ => Err(error),
        };
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(Some(unsafe {
        OwnedFd::from_raw_fd(i32::try_from(fd).unwrap_or(-1))
    }))
}

/// The value of the thread behind `pidfd` in the task storage `map`;
/// `None` when it has none.
///
/// # Errors
/// When the lookup fails for another reason than a missing value.
pub fn lookup(map: BorrowedFd<'_>, pidfd: BorrowedFd<'_>) -> io::Result<Option<TaskState>> {
    let key: i32 = pidfd.as_raw_fd();
    let mut value = TaskState::default();
    let attr = ElemAttr {
        map_fd: u32::try_from(map.as_raw_fd()).unwrap_or(u32::MAX),
        pad: 0,
        key: std::ptr::from_ref(&key) as u64,
        value: std::ptr::from_mut(&mut value) as u64,
        flags: 0,
    };
    // SAFETY: `attr` is a valid bpf_attr prefix for the element commands,
    // its key points at an i32 and its value at a TaskState, the map's
    // value type, both alive for the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_LOOKUP_ELEM,
            std::ptr::from_ref(&attr),
            size_of::<ElemAttr>(),
        )
    };
    if ret == 0 {
        return Ok(Some(value));
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::ENOENT | libc::ESRCH) => Ok(None),
        _ => Err(error),
    }
}

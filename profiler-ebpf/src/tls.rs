//! The current thread's thread pointer (`fsbase` on x86-64), where user
//! programs keep their thread-local storage: glibc's and musl's
//! `pthread_self()`, Go's `g`.
use aya_ebpf::helpers::{bpf_probe_read_kernel, generated::bpf_get_current_task_btf};

use crate::maps;

/// The current thread's `fsbase`; `None` when the kernel's BTF did not
/// say where it is.
#[inline(always)]
pub fn fsbase() -> Option<u64> {
    let offset = maps::fsbase_offset();
    if offset == 0 {
        return None;
    }
    // SAFETY: the helper returns the current task, valid for this run.
    let task = unsafe { bpf_get_current_task_btf() } as u64;
    // SAFETY: a read of kernel memory through the fault-tolerant helper.
    unsafe { bpf_probe_read_kernel((task + u64::from(offset)) as *const u64).ok() }
}

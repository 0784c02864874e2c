//! `BPF_MAP_TYPE_TASK_STORAGE` as a BTF map definition, which aya-ebpf 0.2
//! does not provide (it has the cgroup and inode kinds). A value lives off
//! the thread's own `task_struct`: finding it is a pointer dereference, not
//! a hash of the key and a bucket walk, and the kernel frees it with the
//! thread.
use core::{ffi::c_void, ptr};

use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, BPF_LOCAL_STORAGE_GET_F_CREATE, bpf_map_type, task_struct},
    helpers::generated::{bpf_task_storage_delete, bpf_task_storage_get},
};

/// The map definition, laid out as libbpf-style BTF maps are: the loader
/// reads the type, key, value, size and flags from the field types.
#[repr(C)]
pub struct TaskStorage<T> {
    r#type: *const [i32; bpf_map_type::BPF_MAP_TYPE_TASK_STORAGE as usize],
    key: *const i32,
    value: *const T,
    max_entries: *const [i32; 0],
    map_flags: *const [i32; BPF_F_NO_PREALLOC as usize],
}

// SAFETY: the fields are placeholders the loader reads the BTF of; they are
// never dereferenced, so sharing the static between programs is sound.
unsafe impl<T> Sync for TaskStorage<T> {}

impl<T> TaskStorage<T> {
    pub const fn new() -> Self {
        Self {
            r#type: ptr::null(),
            key: ptr::null(),
            value: ptr::null(),
            max_entries: ptr::null(),
            map_flags: ptr::null(),
        }
    }

    #[inline(always)]
    fn as_ptr(&self) -> *mut c_void {
        ptr::from_ref(self).cast_mut().cast()
    }

    /// The value of thread `task`, if it has one.
    ///
    /// # Safety
    /// `task` must be a `task_struct` pointer the verifier knows as one (a
    /// tp_btf argument or `bpf_get_current_task_btf()`).
    #[inline(always)]
    pub unsafe fn get(&self, task: *mut task_struct) -> Option<*mut T> {
        // SAFETY: per this function's contract; a null value with no
        // create flag only looks up.
        let value = unsafe { bpf_task_storage_get(self.as_ptr(), task, ptr::null_mut(), 0) };
        (!value.is_null()).then_some(value.cast())
    }

    /// The value of thread `task`, created zeroed if it has none (a value
    /// built on the BPF stack to copy from would take its size there).
    /// `None` when the kernel cannot allocate it.
    ///
    /// # Safety
    /// As [`TaskStorage::get`].
    #[inline(always)]
    pub unsafe fn get_or_create(&self, task: *mut task_struct) -> Option<*mut T> {
        // SAFETY: per this function's contract; with no value to copy, the
        // kernel zeroes a new one.
        let value = unsafe {
            bpf_task_storage_get(
                self.as_ptr(),
                task,
                ptr::null_mut(),
                BPF_LOCAL_STORAGE_GET_F_CREATE.into(),
            )
        };
        (!value.is_null()).then_some(value.cast())
    }

    /// Drops thread `task`'s value.
    ///
    /// # Safety
    /// As [`TaskStorage::get`].
    #[inline(always)]
    pub unsafe fn remove(&self, task: *mut task_struct) {
        // SAFETY: per this function's contract.
        let _ = unsafe { bpf_task_storage_delete(self.as_ptr(), task) };
    }
}

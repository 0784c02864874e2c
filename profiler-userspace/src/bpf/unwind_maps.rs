//! The unwinder's maps as the daemon writes them: the row array (mapped
//! into our memory, so a whole table is written without a system call per
//! row), the per-process mappings, and the walker's requests.
use std::{
    os::fd::{AsFd as _, AsRawFd as _},
    ptr::NonNull,
};

use aya::maps::{HashMap, Map, MapData};
use profiler_common::{
    maps::{UNWIND_PROCS, UNWIND_REQUESTS, UNWIND_ROWS},
    unwind::{ProcessMappings, UnwindRow},
};

use super::{Kernel, KernelError};
use crate::unwind::UnwindMaps;

/// `UNWIND_ROWS`, mapped shared into the daemon.
pub struct RowsMapping {
    ptr: NonNull<UnwindRow>,
    rows: usize,
    bytes: usize,
}

impl RowsMapping {
    /// Maps the first `rows` rows of the mmap-able array `map`.
    pub(super) fn new(map: &Map, rows: u32) -> Result<Self, KernelError> {
        let Map::Array(data) = map else {
            return Err(KernelError::MapType { name: UNWIND_ROWS });
        };
        let rows = rows as usize;
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let bytes = (rows * size_of::<UnwindRow>()).div_ceil(page) * page;
        // SAFETY: a fresh shared mapping of the map's fd, which the kernel
        // allows for BPF_F_MMAPABLE arrays; the result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                data.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(KernelError::MapRows(std::io::Error::last_os_error()));
        }
        let ptr = NonNull::new(ptr.cast()).ok_or(KernelError::MapRows(std::io::Error::from(
            std::io::ErrorKind::InvalidData,
        )))?;
        Ok(Self { ptr, rows, bytes })
    }

    fn rows_mut(&mut self) -> &mut [UnwindRow] {
        // SAFETY: the mapping holds `rows` rows, is page-aligned, lives as
        // long as `self`, and only this daemon writes it (the kernel reads).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.rows) }
    }
}

impl Drop for RowsMapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; no slice outlives self.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.bytes) };
    }
}

impl Kernel {
    fn unwind_procs(&mut self) -> Result<HashMap<&mut MapData, u32, ProcessMappings>, KernelError> {
        HashMap::try_from(self.map_mut(UNWIND_PROCS)?).map_err(KernelError::map(UNWIND_PROCS))
    }
}

impl UnwindMaps for Kernel {
    type Error = KernelError;

    fn rows_mut(&mut self) -> &mut [UnwindRow] {
        self.unwind_rows.rows_mut()
    }

    fn set_mappings(&mut self, pid: u32, mappings: &ProcessMappings) -> Result<(), KernelError> {
        self.unwind_procs()?
            .insert(pid, mappings, 0)
            .map_err(KernelError::map(UNWIND_PROCS))
    }

    fn remove_mappings(&mut self, pid: u32) -> Result<(), KernelError> {
        // The kernel drops a process's entry itself on exec, so it may be
        // gone already; aya reports that as ENOENT from the syscall.
        match self.unwind_procs()?.remove(&pid) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(aya::maps::MapError::SyscallError(e))
                if e.io_error.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(())
            }
            Err(source) => Err(KernelError::Map {
                name: UNWIND_PROCS,
                source,
            }),
        }
    }

    fn take_requests(&mut self) -> Result<Vec<u32>, KernelError> {
        let mut requests: HashMap<&mut MapData, u32, u8> =
            HashMap::try_from(self.map_mut(UNWIND_REQUESTS)?)
                .map_err(KernelError::map(UNWIND_REQUESTS))?;
        let pids: Vec<u32> = requests.keys().filter_map(Result::ok).collect();
        for pid in &pids {
            let _ = requests.remove(pid);
        }
        Ok(pids)
    }
}

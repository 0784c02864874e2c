//! The unwinder's maps as the daemon writes them: the row array (a window
//! of it mapped into our memory while one table is written, so a whole
//! table takes no system call per row), the per-process mappings, and the
//! walker's requests.
use std::{
    os::fd::{AsFd as _, AsRawFd as _},
    ptr::NonNull,
};

use aya::{
    Ebpf,
    maps::{Array, HashMap, Map, MapData},
};
use profiler_common::{
    maps::{CGROUP_MOVES, UNWIND_FILES, UNWIND_PROCS, UNWIND_REQUESTS, UNWIND_ROWS},
    process::ProcessSeen,
    unwind::{
        ProcessMappings, UnwindRow,
        by_file::{FileKey, FileTable},
    },
};

use super::{
    batch,
    error::{KernelError, removed, take_map},
};

/// A window of `UNWIND_ROWS` mapped shared into the daemon for as long as
/// one table is written, so that the daemon's memory holds only that
/// window: the array itself (`--unwind-table-memory`) is kernel memory,
/// and mapping all of it would count it again in our RSS.
struct RowsWindow {
    ptr: NonNull<u8>,
    bytes: usize,
}

impl RowsWindow {
    /// Maps the pages of the array `map` that hold rows
    /// `start .. start + rows`; returns the window and where row `start`
    /// is in it.
    fn new(map: &Map, start: u32, rows: usize) -> Result<(Self, usize), KernelError> {
        let Map::Array(data) = map else {
            return Err(KernelError::MapType { name: UNWIND_ROWS });
        };
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let first_byte = start as usize * size_of::<UnwindRow>();
        let offset = first_byte / page * page;
        let inner = first_byte - offset;
        let bytes = (inner + rows * size_of::<UnwindRow>()).div_ceil(page) * page;
        let file_offset = libc::off_t::try_from(offset)
            .map_err(|_| KernelError::MapRows(std::io::ErrorKind::InvalidInput.into()))?;
        // SAFETY: a fresh shared mapping of part of the map's fd, which the
        // kernel allows for BPF_F_MMAPABLE arrays (it refuses a window past
        // the array's end); the result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                data.fd().as_fd().as_raw_fd(),
                file_offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(KernelError::MapRows(std::io::Error::last_os_error()));
        }
        let ptr = NonNull::new(ptr.cast())
            .ok_or(KernelError::MapRows(std::io::ErrorKind::InvalidData.into()))?;
        Ok((Self { ptr, bytes }, inner))
    }

    /// Copies `rows` to byte `at` of the window.
    fn write(&mut self, at: usize, rows: &[UnwindRow]) {
        let len = size_of_val(rows);
        assert!(at + len <= self.bytes, "rows past the mapped window");
        // SAFETY: the destination lies inside the mapping (checked above),
        // which lives as long as `self`; the source is a distinct slice of
        // plain-old-data rows. Only this daemon writes the array (the kernel
        // reads it), and a table's rows are read only once its mappings are
        // published, after this copy.
        unsafe {
            std::ptr::copy_nonoverlapping(
                rows.as_ptr().cast::<u8>(),
                self.ptr.as_ptr().add(at),
                len,
            );
        }
    }
}

impl Drop for RowsWindow {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; nothing points into it
        // past `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.bytes) };
    }
}

/// The unwinder's maps, taken from the loaded object: the row array, the
/// mappings of each process, and the walker's requests.
pub(super) struct UnwindTables {
    rows: Map,
    procs: Map,
    files: Map,
    requests: Map,
    cgroup_moves: Map,
}

impl UnwindTables {
    /// Takes the maps out of `ebpf`.
    pub(super) fn take(ebpf: &mut Ebpf) -> Result<Self, KernelError> {
        Ok(Self {
            rows: take_map(ebpf, UNWIND_ROWS)?,
            procs: take_map(ebpf, UNWIND_PROCS)?,
            files: take_map(ebpf, UNWIND_FILES)?,
            requests: take_map(ebpf, UNWIND_REQUESTS)?,
            cgroup_moves: take_map(ebpf, CGROUP_MOVES)?,
        })
    }

    fn procs(&mut self) -> Result<HashMap<&mut MapData, u32, ProcessMappings>, KernelError> {
        HashMap::try_from(&mut self.procs).map_err(KernelError::map(UNWIND_PROCS))
    }

    fn files(&mut self) -> Result<HashMap<&mut MapData, FileKey, FileTable>, KernelError> {
        HashMap::try_from(&mut self.files).map_err(KernelError::map(UNWIND_FILES))
    }
}

/// The kernel maps the unwinder (`crate::unwind`) writes:
/// [`Kernel`](super::Kernel) here, in memory in tests (`in_memory.rs`).
pub trait UnwindMaps {
    type Error;
    /// Writes `rows` into the kernel's row array from row `start` on
    /// (the unwinder keeps them inside the array's length).
    ///
    /// # Errors
    /// When the kernel's array cannot be written.
    fn write_rows(&mut self, start: u32, rows: &[UnwindRow]) -> Result<(), Self::Error>;
    /// Publishes (replaces) the mappings of `pid`.
    ///
    /// # Errors
    /// When the kernel map refuses the entry.
    fn set_mappings(&mut self, pid: u32, mappings: &ProcessMappings) -> Result<(), Self::Error>;
    /// Forgets `pid`.
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    fn remove_mappings(&mut self, pid: u32) -> Result<(), Self::Error>;
    /// Publishes where the table of the file `key` names is, for processes
    /// not published yet.
    ///
    /// # Errors
    /// When the kernel map refuses the entry (full).
    fn set_file_table(&mut self, key: &FileKey, table: &FileTable) -> Result<(), Self::Error>;
    /// Forgets the table of the file `key` names (its rows are given back).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    fn remove_file_table(&mut self, key: &FileKey) -> Result<(), Self::Error>;
    /// The pids the walker asked for since the last call, each with what
    /// the asking thread saw of its process.
    ///
    /// # Errors
    /// When the kernel map cannot be read.
    fn take_requests(&mut self) -> Result<Vec<(u32, ProcessSeen)>, Self::Error>;
    /// Puts `pid` back among the requests, so that the walker does not
    /// ask (and ring) for it again before the next poll takes it.
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    fn request(&mut self, pid: u32) -> Result<(), Self::Error>;
    /// Puts requests back as the kernel made them (each pid with what it
    /// saw), for a later serve. One the kernel made again since they were
    /// taken (microseconds before) is replaced: a walk that needed it at
    /// once makes a waiting request urgent again.
    ///
    /// # Errors
    /// When the kernel map cannot be written (but for a request there).
    fn put_back(&mut self, requests: &[(u32, ProcessSeen)]) -> Result<(), Self::Error>;
    /// The kernel's count of moves between cgroups so far
    /// (`profiler_common::maps::CGROUP_MOVES`).
    ///
    /// # Errors
    /// When the kernel map cannot be read.
    fn cgroup_moves(&mut self) -> Result<u64, Self::Error>;
}

impl UnwindMaps for UnwindTables {
    type Error = KernelError;

    fn write_rows(&mut self, start: u32, rows: &[UnwindRow]) -> Result<(), KernelError> {
        let (mut window, at) = RowsWindow::new(&self.rows, start, rows.len())?;
        window.write(at, rows);
        Ok(())
    }

    fn set_mappings(&mut self, pid: u32, mappings: &ProcessMappings) -> Result<(), KernelError> {
        self.procs()?
            .insert(pid, mappings, 0)
            .map_err(KernelError::map(UNWIND_PROCS))
    }

    fn remove_mappings(&mut self, pid: u32) -> Result<(), KernelError> {
        // The kernel drops a process's entry itself on exec, so it may be
        // gone already; aya reports that as ENOENT from the syscall.
        removed(self.procs()?.remove(&pid)).map_err(KernelError::map(UNWIND_PROCS))
    }

    fn set_file_table(&mut self, key: &FileKey, table: &FileTable) -> Result<(), KernelError> {
        self.files()?
            .insert(key, table, 0)
            .map_err(KernelError::map(UNWIND_FILES))
    }

    fn remove_file_table(&mut self, key: &FileKey) -> Result<(), KernelError> {
        removed(self.files()?.remove(key)).map_err(KernelError::map(UNWIND_FILES))
    }

    fn take_requests(&mut self) -> Result<Vec<(u32, ProcessSeen)>, KernelError> {
        batch::take_all_of(&self.requests, UNWIND_REQUESTS)
    }

    fn cgroup_moves(&mut self) -> Result<u64, KernelError> {
        let moves: Array<&mut MapData, u64> =
            Array::try_from(&mut self.cgroup_moves).map_err(KernelError::map(CGROUP_MOVES))?;
        moves.get(&0, 0).map_err(KernelError::map(CGROUP_MOVES))
    }

    fn request(&mut self, pid: u32) -> Result<(), KernelError> {
        let mut requests: HashMap<&mut MapData, u32, ProcessSeen> =
            HashMap::try_from(&mut self.requests).map_err(KernelError::map(UNWIND_REQUESTS))?;
        requests
            .insert(pid, ProcessSeen::default(), 0)
            .map_err(KernelError::map(UNWIND_REQUESTS))
    }

    fn put_back(&mut self, requests: &[(u32, ProcessSeen)]) -> Result<(), KernelError> {
        let Map::HashMap(map) = &self.requests else {
            return Err(KernelError::MapType {
                name: UNWIND_REQUESTS,
            });
        };
        batch::put_all(map, requests).map_err(|source| KernelError::MapIo {
            name: UNWIND_REQUESTS,
            source,
        })
    }
}

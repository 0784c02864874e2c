//! A process's executable mappings through the kernel's `PROCMAP_QUERY`
//! ioctl on `/proc/PID/maps` (Linux 6.11+): one query per executable
//! mapping, and no text made of the others (a process maps many more
//! data, heap and stack regions than code). The text's `[vsyscall]` page
//! is not among them (it is no mapping of the process's own; no sample
//! lands in it: its calls are emulated by the kernel). Where the kernel
//! lacks it (`ENOTTY`), [`read`] says so once and for all, and `maps.rs`
//! reads the text; it makes its mappings of what this returns.
use std::{
    fs::File,
    io,
    os::fd::AsRawFd as _,
    sync::atomic::{AtomicU8, Ordering},
};

/// `struct procmap_query` (`include/uapi/linux/fs.h`).
#[repr(C)]
#[derive(Debug, Default)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

/// `_IOWR('f', 17, struct procmap_query)`.
const PROCMAP_QUERY: libc::c_ulong = 0xC068_6611;
const _: () = assert!(size_of::<ProcmapQuery>() == 0x68);
/// The executable mapping that covers the address, or the next one.
const EXECUTABLE_COVERING_OR_NEXT: u64 = 0x04 | 0x10;
/// Room for a mapping's name: a path (`PATH_MAX`).
const NAME_MAX: u32 = 4096;

/// Whether the kernel has the query: not known yet, yes, no.
static SUPPORT: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const YES: u8 = 1;
const NO: u8 = 2;

/// One executable mapping as the kernel answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub dev_major: u32,
    pub dev_minor: u32,
    pub inode: u64,
    /// Its file's path (without the text's ` (deleted)`), or a pseudo
    /// name (`[vdso]`); empty for none.
    pub name: String,
}

/// The executable mappings of `pid`, sorted by address; `None` when the
/// kernel has no `PROCMAP_QUERY`.
pub fn read(pid: u32) -> Option<io::Result<Vec<Mapping>>> {
    if SUPPORT.load(Ordering::Relaxed) == NO {
        return None;
    }
    let file = match File::open(format!("/proc/{pid}/maps")) {
        Ok(file) => file,
        Err(e) => return Some(Err(e)),
    };
    let mut name = vec![0u8; NAME_MAX as usize];
    let mut vmas = Vec::new();
    let mut addr = 0;
    loop {
        let mut query = ProcmapQuery {
            size: size_of::<ProcmapQuery>() as u64,
            query_flags: EXECUTABLE_COVERING_OR_NEXT,
            query_addr: addr,
            vma_name_size: NAME_MAX,
            vma_name_addr: name.as_mut_ptr() as u64,
            ..ProcmapQuery::default()
        };
        // SAFETY: `query` is a valid `struct procmap_query` the call reads
        // and writes; its name buffer is `name`, NAME_MAX writable bytes
        // that outlive the call.
        let done = unsafe { libc::ioctl(file.as_raw_fd(), PROCMAP_QUERY, &raw mut query) };
        if done < 0 {
            let error = io::Error::last_os_error();
            return match error.raw_os_error() {
                // No executable mapping at or after `addr`: all read.
                Some(libc::ENOENT) => Some(Ok(vmas)),
                Some(libc::ENOTTY) if SUPPORT.load(Ordering::Relaxed) == UNKNOWN => {
                    SUPPORT.store(NO, Ordering::Relaxed);
                    None
                }
                _ => Some(Err(error)),
            };
        }
        SUPPORT.store(YES, Ordering::Relaxed);
        vmas.push(mapping(&query, &name));
        addr = query.vma_end;
    }
}

/// The mapping `query` found, named by the first bytes of `name`.
fn mapping(query: &ProcmapQuery, name: &[u8]) -> Mapping {
    // The size includes the terminating NUL; 0 for no name.
    let len = (query.vma_name_size as usize)
        .saturating_sub(1)
        .min(name.len());
    let path = String::from_utf8_lossy(&name[..len]);
    Mapping {
        start: query.vma_start,
        end: query.vma_end,
        offset: query.vma_offset,
        dev_major: query.dev_major,
        dev_minor: query.dev_minor,
        inode: query.inode,
        name: path.strip_suffix(" (deleted)").unwrap_or(&path).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_gone_is_an_error() {
        assert!(read(u32::MAX).is_none_or(|r| r.is_err()));
    }
}

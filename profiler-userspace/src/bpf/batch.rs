//! Reads and clears a BPF hash map in a few system calls
//! (`BPF_MAP_LOOKUP_AND_DELETE_BATCH`, Linux 5.6), which aya does not wrap.
//! Walking a map entry by entry takes three calls per entry (next key,
//! lookup, delete): most of the daemon's time at a window's end. Entries
//! put back go in one call too (`BPF_MAP_UPDATE_BATCH`).
use std::{
    io,
    mem::size_of,
    os::fd::{AsFd as _, AsRawFd as _},
};

use aya::{
    Pod,
    maps::{Map, MapData},
};

use super::error::KernelError;

#[cfg(test)]
mod tests;

/// `BPF_MAP_LOOKUP_AND_DELETE_BATCH` in `enum bpf_cmd` (`linux/bpf.h`).
const BPF_MAP_LOOKUP_AND_DELETE_BATCH: libc::c_long = 25;
/// `BPF_MAP_UPDATE_BATCH`.
const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;

/// Entries asked for per call, at most. The kernel hands out whole
/// buckets, and fails with `ENOSPC` when the first bucket it reaches holds
/// more than that: hash maps have as many buckets as entries, so a bucket
/// holds a handful at most (a longer one has the call asked again with
/// room for it).
const BATCH: usize = 1024;

/// The most bytes of keys and values asked for per call: below the
/// allocator's mmap threshold (`allocator.rs`), so that each drain's
/// buffers come from the heap, not fresh pages faulted in and unmapped
/// again (a stack map's 1 KiB values, 1,024 of them, were 256 such pages
/// a drain).
const BATCH_BYTES: usize = 128 << 10;

/// The `batch` member of `union bpf_attr`. The kernel zero-fills what a
/// shorter attribute leaves out.
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// Every entry of hash map `map` (named `name`), which is left empty.
///
/// # Errors
/// When `map` is not a hash map, or the kernel refuses the call.
pub fn take_all_of<K: Pod, V: Pod>(
    map: &Map,
    name: &'static str,
) -> Result<Vec<(K, V)>, KernelError> {
    take_all_of_with(map, name, |key, value: &V| (key, *value))
}

/// [`take_all_of`], each entry made into what `each` makes of it as it is
/// taken (a large value is not copied whole again).
///
/// # Errors
/// When `map` is not a hash map, or the kernel refuses the call.
pub fn take_all_of_with<K: Pod, V: Pod, T>(
    map: &Map,
    name: &'static str,
    each: impl FnMut(K, &V) -> T,
) -> Result<Vec<T>, KernelError> {
    match map {
        Map::HashMap(data) => {
            take_all(data, each).map_err(|source| KernelError::MapIo { name, source })
        }
        _ => Err(KernelError::MapType { name }),
    }
}

/// Takes every entry out of hash map `map`, each made into what `each`
/// makes of it: each is read and deleted in the same call, so one the
/// kernel adds meanwhile is either taken or left for the next drain,
/// never lost.
///
/// # Errors
/// When the kernel refuses the call (`ENOSPC` would mean a bucket longer
/// than [`BATCH`]).
fn take_all<K: Pod, V: Pod, T>(
    map: &MapData,
    mut each: impl FnMut(K, &V) -> T,
) -> io::Result<Vec<T>> {
    let fd = fd_of(map)?;
    let mut room = (BATCH_BYTES / (size_of::<K>() + size_of::<V>()).max(1)).clamp(1, BATCH);
    let mut keys: Vec<K> = Vec::with_capacity(room);
    let mut values: Vec<V> = Vec::with_capacity(room);
    // The kernel's position between calls (for a hash map, a 4-byte bucket
    // index): each call writes it to `out_batch` (`position[1]`), and the
    // next passes it back as `in_batch` (`position[0]`).
    let mut position = [0u64; 2];
    let mut taken = Vec::new();
    let mut first = true;
    loop {
        let mut attr = BatchAttr {
            in_batch: if first { 0 } else { position.as_ptr() as u64 },
            out_batch: position[1..].as_mut_ptr() as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: u32::try_from(room).unwrap_or(u32::MAX),
            map_fd: fd,
            ..BatchAttr::default()
        };
        // SAFETY: its pointers name buffers of `room` keys and values and
        // of 8 bytes of position, all alive across the call.
        let done = match unsafe { batch_call(BPF_MAP_LOOKUP_AND_DELETE_BATCH, &mut attr) } {
            Ok(()) => false,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => true,
            // The next bucket holds more than `room`; nothing was taken.
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && room < BATCH => {
                room = (room * 2).min(BATCH);
                keys.reserve_exact(room);
                values.reserve_exact(room);
                continue;
            }
            Err(e) => return Err(e),
        };
        let count = (attr.count as usize).min(room);
        // SAFETY: the kernel wrote `count` keys and values into the
        // buffers, and any bit pattern is a valid `Pod`.
        unsafe {
            keys.set_len(count);
            values.set_len(count);
        }
        taken.extend(
            keys.drain(..)
                .zip(&values)
                .map(|(key, value)| each(key, value)),
        );
        values.clear();
        if done {
            return Ok(taken);
        }
        position[0] = position[1];
        first = false;
    }
}

/// Writes `entries` into hash map `map`, replacing the entries of their
/// keys, in one call. (Batches refuse `BPF_NOEXIST`: `EINVAL` on 6.18.)
///
/// # Errors
/// When the kernel refuses an entry (the map is full).
pub fn put_all<K: Pod, V: Pod>(map: &MapData, entries: &[(K, V)]) -> io::Result<()> {
    let fd = fd_of(map)?;
    let (keys, values): (Vec<K>, Vec<V>) = entries.iter().copied().unzip();
    let mut attr = BatchAttr {
        keys: keys.as_ptr() as u64,
        values: values.as_ptr() as u64,
        count: u32::try_from(keys.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
        map_fd: fd,
        ..BatchAttr::default()
    };
    // SAFETY: its pointers name `count` keys and values, alive across the
    // call, which the kernel only reads.
    unsafe { batch_call(BPF_MAP_UPDATE_BATCH, &mut attr) }
}

/// `map`'s file descriptor, as `bpf_attr` holds it.
fn fd_of(map: &MapData) -> io::Result<u32> {
    u32::try_from(map.fd().as_fd().as_raw_fd())
        .map_err(|_| io::Error::from_raw_os_error(libc::EBADF))
}

/// `bpf(command, attr)` for a batch command.
///
/// # Safety
/// `attr`'s pointers must name buffers that the command may read and
/// write (its keys, values and positions for `attr.count` entries), alive
/// across the call.
unsafe fn batch_call(command: libc::c_long, attr: &mut BatchAttr) -> io::Result<()> {
    // SAFETY: `attr` is a valid `bpf_attr` prefix for the batch commands;
    // the caller vouches for the buffers it points to.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            command,
            std::ptr::from_mut(attr),
            size_of::<BatchAttr>(),
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

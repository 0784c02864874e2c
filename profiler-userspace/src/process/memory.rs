//! Reading another process's memory with `process_vm_readv`: the target
//! is neither stopped nor signalled, and an address that is no longer
//! mapped is an error, never a fault.
use std::io;

/// Remote ranges per call (the kernel's `UIO_MAXIOV`).
const IOV_MAX: usize = 1024;

/// One process's memory.
#[derive(Clone, Copy, Debug)]
pub struct Memory {
    pub pid: u32,
}

impl Memory {
    /// Fills `buf` from `address`.
    ///
    /// # Errors
    /// When any of it cannot be read (the process is gone, the address is
    /// unmapped), or is read only in part.
    pub fn read(self, address: u64, buf: &mut [u8]) -> io::Result<()> {
        self.read_many(&[(address, buf.len())], buf)
    }

    /// Reads each `(address, len)` of `ranges` into `out`, one after the
    /// other (`out` is as long as all of them).
    ///
    /// # Errors
    /// As [`Self::read`]: one range that cannot be read fails the call.
    pub fn read_many(self, ranges: &[(u64, usize)], out: &mut [u8]) -> io::Result<()> {
        let total: usize = ranges.iter().map(|r| r.1).sum();
        if total != out.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ranges and buffer differ",
            ));
        }
        let pid = libc::pid_t::try_from(self.pid).map_err(|_| io::ErrorKind::InvalidInput)?;
        let mut done = 0;
        for batch in ranges.chunks(IOV_MAX) {
            let len: usize = batch.iter().map(|r| r.1).sum();
            let local = [libc::iovec {
                iov_base: out[done..done + len].as_mut_ptr().cast(),
                iov_len: len,
            }];
            let remote: Vec<libc::iovec> = batch
                .iter()
                .map(|&(address, len)| libc::iovec {
                    iov_base: address as *mut libc::c_void,
                    iov_len: len,
                })
                .collect();
            // SAFETY: `local` describes `len` writable bytes of `out`;
            // the remote iovecs are only addresses in the other process,
            // which the kernel checks; both arrays outlive the call.
            let read = unsafe {
                libc::process_vm_readv(
                    pid,
                    local.as_ptr(),
                    1,
                    remote.as_ptr(),
                    libc::c_ulong::try_from(remote.len()).unwrap_or(0),
                    0,
                )
            };
            match usize::try_from(read) {
                Err(_) => return Err(io::Error::last_os_error()),
                Ok(n) if n != len => {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "partial read"));
                }
                Ok(_) => done += len,
            }
        }
        Ok(())
    }
}

/// The little-endian `u64` at `at` in `bytes`.
#[must_use]
pub fn u64_at(bytes: &[u8], at: u64) -> Option<u64> {
    let at = usize::try_from(at).ok()?;
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_memory_and_fails_on_unmapped_addresses() {
        let data: Vec<u64> = (0..4).collect();
        let me = Memory {
            pid: std::process::id(),
        };
        let mut buf = [0u8; 16];
        let base = data.as_ptr() as u64;
        me.read_many(&[(base + 8, 8), (base + 24, 8)], &mut buf)
            .unwrap();
        assert_eq!((u64_at(&buf, 0), u64_at(&buf, 8)), (Some(1), Some(3)));
        assert!(me.read(8, &mut buf).is_err(), "page 0 is never mapped");
    }
}

//! OpenTelemetry's thread context (OTEP 4947): a program that publishes
//! the active trace keeps, in the thread-local `otel_thread_ctx_v1`, a
//! pointer to a record whose first 28 bytes are the trace id (16), the
//! span id (8), a valid flag (1 when whole), the trace flags and the size
//! of the attributes that follow. A sample of a thread of a process
//! published in `THREAD_CTX_PROCS` reads it and records the trace and span
//! ids in its key.

/// Where a process keeps `otel_thread_ctx_v1` (published per process in
/// `THREAD_CTX_PROCS`): in the thread's static TLS (`module` 0: the
/// executable's variable, or a library's the dynamic linker placed
/// there), or in the TLS block of a library's module through the thread's
/// dynamic thread vector (glibc's DTV: a library loaded by `dlopen`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadCtxProcess {
    /// `module` 0: the variable's address less the thread pointer
    /// (`fsbase`); otherwise its offset in the module's block.
    pub tls_offset: i64,
    /// The TLS module id of the library that defines the variable (0: in
    /// static TLS).
    pub module: u64,
}

/// Where glibc's x86-64 thread control block (at the thread pointer)
/// keeps the thread's DTV: `tcbhead_t.dtv`, after `tcb`.
pub const DTV_AT: u64 = 8;
/// The bytes of a DTV entry (`dtv_t`: the block's address, then the
/// address to free); entry `m` is module `m`'s, and the entry before
/// the first holds the number of entries.
pub const DTV_ENTRY: u64 = 16;
/// A DTV entry's block address when the thread has not touched the
/// module's variables yet (glibc's `TLS_DTV_UNALLOCATED`).
pub const DTV_UNALLOCATED: u64 = u64::MAX;

/// Where the record's fields are: the trace id (16 bytes), the span id
/// (8), the valid flag (1 byte), the trace flags (1), the size of the
/// attributes (2), then the attributes.
pub const TRACE_ID: u64 = 0;
pub const SPAN_ID: u64 = 16;
pub const VALID_AT: u64 = 24;
pub const ATTRS_SIZE_AT: u64 = 26;
pub const ATTRS_AT: u64 = 28;

/// The valid flag of a record that may be read.
pub const VALID: u8 = 1;

/// The attribute words a sample reads: what fits the 640-byte record the
/// specification recommends writers stay within, in whole words (longer
/// attributes are cut, and their last, incomplete entry left out).
pub const ATTRS_WORDS: usize = 77;
pub const ATTRS_MAX: usize = ATTRS_WORDS * 8;

/// A record's attributes as a sample read them (`THREAD_ATTRS`'s value,
/// under the hash the sample key holds): entries of a key index (into
/// the process context's `threadlocal.attribute_key_map`), a length and
/// that many bytes of UTF-8 value; zeros after `len` bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadAttrs {
    pub len: u64,
    pub words: [u64; ATTRS_WORDS],
}

impl ThreadAttrs {
    /// The bytes read.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the words are ATTRS_MAX initialised bytes, and a byte
        // needs no alignment.
        let all =
            unsafe { core::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), ATTRS_MAX) };
        let len = usize::try_from(self.len)
            .unwrap_or(ATTRS_MAX)
            .min(ATTRS_MAX);
        &all[..len]
    }

    /// The entries, as (key index, value bytes), in the order written; an
    /// entry the bytes end within is left out.
    pub fn entries(&self) -> impl Iterator<Item = (u8, &[u8])> {
        let bytes = self.bytes();
        let mut at = 0;
        core::iter::from_fn(move || {
            let (&key, &len) = (bytes.get(at)?, bytes.get(at + 1)?);
            let value = bytes.get(at + 2..at + 2 + usize::from(len))?;
            at += 2 + usize::from(len);
            Some((key, value))
        })
    }

    /// Content hash of the length and words (zeros past the length);
    /// never 0, which a key holds for no attributes.
    ///
    /// Written as a fixed-bound loop so the eBPF verifier accepts it.
    #[must_use]
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    pub fn hash(&self) -> u64 {
        let mut hash = self.len;
        let mut i = 0;
        while i < ATTRS_WORDS {
            hash = crate::hash::mix(hash, self.words[i]);
            i += 1;
        }
        let hash = crate::hash::finish(hash);
        if hash == 0 { 1 } else { hash }
    }
}

#[cfg(feature = "user")]
mod pod {
    use super::{ThreadAttrs, ThreadCtxProcess};

    // SAFETY: repr(C): 78 u64, no padding; every bit pattern is valid.
    unsafe impl aya::Pod for ThreadAttrs {}

    // SAFETY: repr(C): an i64 and a u64, no padding; every bit pattern is
    // valid.
    unsafe impl aya::Pod for ThreadCtxProcess {}
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::vec::Vec;

    fn attrs(bytes: &[u8]) -> ThreadAttrs {
        let mut out = ThreadAttrs {
            len: bytes.len() as u64,
            words: [0; ATTRS_WORDS],
        };
        for (i, b) in bytes.iter().enumerate() {
            out.words[i / 8] |= u64::from(*b) << (8 * (i % 8));
        }
        out
    }

    #[test]
    fn entries_are_read_until_one_does_not_fit() {
        let read = attrs(b"\x00\x09/checkout\x01\x04POST\x02\x09cut");
        let entries: Vec<_> = read.entries().collect();
        assert_eq!(entries, [(0, &b"/checkout"[..]), (1, &b"POST"[..])]);
        assert_eq!(attrs(b"").entries().count(), 0);
        assert_eq!(attrs(b"\x00").entries().count(), 0);
        let mut long = attrs(b"\x00\x01a");
        long.len = u64::MAX;
        assert_eq!(long.entries().count(), 1 + (ATTRS_MAX - 3) / 2);
    }

    #[test]
    fn the_hash_depends_on_bytes_and_length() {
        let a = attrs(b"\x00\x01a");
        assert_eq!(a.hash(), attrs(b"\x00\x01a").hash());
        assert_ne!(a.hash(), attrs(b"\x00\x01b").hash());
        assert_ne!(a.hash(), attrs(b"\x00\x01a\x00").hash());
        assert_ne!(a.hash(), 0);
    }
}

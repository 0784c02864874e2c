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
/// (8), the valid flag (1 byte), then the trace flags (1) and the size of
/// the attributes (2) that the samples do not read.
pub const TRACE_ID: u64 = 0;
pub const SPAN_ID: u64 = 16;
pub const VALID_AT: u64 = 24;

/// The valid flag of a record that may be read.
pub const VALID: u8 = 1;

#[cfg(feature = "user")]
mod pod {
    use super::ThreadCtxProcess;

    // SAFETY: repr(C): an i64 and a u64, no padding; every bit pattern is
    // valid.
    unsafe impl aya::Pod for ThreadCtxProcess {}
}

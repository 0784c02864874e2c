//! OpenTelemetry's thread context (OTEP 4947): a program that publishes
//! the active trace keeps, in the thread-local `otel_thread_ctx_v1`, a
//! pointer to a record whose first 28 bytes are the trace id (16), the
//! span id (8), a valid flag (1 when whole), the trace flags and the size
//! of the attributes that follow. A sample of a thread of a process
//! published in `THREAD_CTX_PROCS` reads it and records the trace and span
//! ids in its key.

/// Where a process keeps `otel_thread_ctx_v1` (published per process in
/// `THREAD_CTX_PROCS`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadCtxProcess {
    /// The variable's address less the thread pointer (`fsbase`).
    pub tls_offset: i64,
}

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

    // SAFETY: repr(C): one i64, no padding; every bit pattern is valid.
    unsafe impl aya::Pod for ThreadCtxProcess {}
}

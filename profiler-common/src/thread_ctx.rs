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

/// The record's fixed part, as the sample reads it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordHeader {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub valid: u8,
    pub trace_flags: u8,
    pub attrs_size: u16,
}

/// The value of [`RecordHeader::valid`] for a record that may be read.
pub const VALID: u8 = 1;

#[cfg(feature = "user")]
mod pod {
    use super::ThreadCtxProcess;

    // SAFETY: repr(C): one i64, no padding; every bit pattern is valid.
    unsafe impl aya::Pod for ThreadCtxProcess {}
}

const _: () = assert!(size_of::<RecordHeader>() == 28);

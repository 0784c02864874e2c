//! OpenTelemetry's thread context (see `profiler_common::thread_ctx`): the
//! trace and span the current thread runs in, for its samples.
use aya_ebpf::helpers::bpf_probe_read_user;
use profiler_common::thread_ctx::{RecordHeader, VALID};

use crate::{maps, tls};

/// The trace and span ids the current thread of process `pid` has
/// published; zeros for none (no context published, no record attached,
/// a record being written, or memory out of reach).
#[inline(always)]
pub fn ids(pid: u32) -> ([u8; 16], [u8; 8]) {
    read_ids(pid).unwrap_or(([0; 16], [0; 8]))
}

#[inline(always)]
fn read_ids(pid: u32) -> Option<([u8; 16], [u8; 8])> {
    let process = maps::thread_ctx_process(pid)?;
    let at = tls::fsbase()?.wrapping_add_signed(process.tls_offset);
    // SAFETY: reads user memory through the fault-tolerant helper.
    let record = unsafe { bpf_probe_read_user(at as *const u64) }.ok()?;
    if record == 0 {
        return None;
    }
    // SAFETY: as above.
    let header = unsafe { bpf_probe_read_user(record as *const RecordHeader) }.ok()?;
    (header.valid == VALID).then_some((header.trace_id, header.span_id))
}

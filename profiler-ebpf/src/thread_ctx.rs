//! OpenTelemetry's thread context (see `profiler_common::thread_ctx`): the
//! trace and span the current thread runs in, for its samples.
use aya_ebpf::helpers::{bpf_probe_read_user, bpf_probe_read_user_buf};
use profiler_common::{
    stats::Stat,
    thread_ctx::{
        DTV_AT, DTV_ENTRY, DTV_UNALLOCATED, SPAN_ID, TRACE_ID, ThreadCtxProcess, VALID, VALID_AT,
    },
};

use crate::{maps, tls};

/// Reads into `trace_id` and `span_id` (zeros on entry) the trace and span
/// the current thread of process `pid` has published; leaves them zero
/// for none (no context published, no record attached, a record being
/// written, or memory out of reach: those two counted in
/// `Stat::ThreadCtxInvalid`). Read in place: the callers' stacks
/// are near the verifier's limit.
#[inline(always)]
pub fn read_ids(pid: u32, trace_id: &mut [u8; 16], span_id: &mut [u8; 8]) {
    let Some(record) = record(pid) else {
        return;
    };
    // SAFETY: reads user memory through the fault-tolerant helpers.
    let read = unsafe {
        bpf_probe_read_user_buf((record + TRACE_ID) as *const u8, trace_id).is_ok()
            && bpf_probe_read_user_buf((record + SPAN_ID) as *const u8, span_id).is_ok()
    };
    if !read {
        *trace_id = [0; 16];
        *span_id = [0; 8];
        maps::count(Stat::ThreadCtxInvalid, 1);
    }
}

/// The record attached to the current thread, when it is whole.
#[inline(always)]
fn record(pid: u32) -> Option<u64> {
    let process = maps::thread_ctx_process(pid)?;
    let at = variable(process)?;
    // SAFETY: reads user memory through the fault-tolerant helper.
    let record = unsafe { bpf_probe_read_user(at as *const u64) }.ok()?;
    if record == 0 {
        return None;
    }
    // SAFETY: as above.
    let valid = unsafe { bpf_probe_read_user((record + VALID_AT) as *const u8) }.ok();
    if valid == Some(VALID) {
        Some(record)
    } else {
        maps::count(Stat::ThreadCtxInvalid, 1);
        None
    }
}

/// The current thread's `otel_thread_ctx_v1`: in static TLS, or in its
/// module's block, found through the thread's DTV (`None` when the thread
/// has not touched the module's variables yet, or the DTV is shorter).
#[inline(always)]
fn variable(process: &ThreadCtxProcess) -> Option<u64> {
    let tp = tls::fsbase()?;
    if process.module == 0 {
        return Some(tp.wrapping_add_signed(process.tls_offset));
    }
    // SAFETY: reads user memory through the fault-tolerant helper.
    let dtv = unsafe { bpf_probe_read_user((tp + DTV_AT) as *const u64) }.ok()?;
    // SAFETY: as above.
    let entries = unsafe { bpf_probe_read_user((dtv.wrapping_sub(DTV_ENTRY)) as *const u64) }.ok()?;
    if process.module > entries {
        return None;
    }
    let entry = dtv.wrapping_add(process.module.wrapping_mul(DTV_ENTRY));
    // SAFETY: as above.
    let block = unsafe { bpf_probe_read_user(entry as *const u64) }.ok()?;
    if block == 0 || block == DTV_UNALLOCATED {
        return None;
    }
    Some(block.wrapping_add_signed(process.tls_offset))
}

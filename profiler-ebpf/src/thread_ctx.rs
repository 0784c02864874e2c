//! OpenTelemetry's thread context (see `profiler_common::thread_ctx`): the
//! trace and span the current thread runs in, and the record's
//! attributes, for its samples.
use aya_ebpf::helpers::{bpf_probe_read_user, bpf_probe_read_user_buf};
use profiler_common::{
    runtimes::Runtimes,
    sample::SampleKey,
    stats::Stat,
    thread_ctx::{
        ATTRS_AT, ATTRS_MAX, ATTRS_SIZE_AT, DTV_AT, DTV_ENTRY, DTV_UNALLOCATED, SPAN_ID, TRACE_ID,
        ThreadCtxProcess, VALID, VALID_AT,
    },
};

use crate::{maps, maps::Scratch, tls};

/// Reads into `key` (its ids and attributes zero on entry) the trace and
/// span the current thread of process `pid` has published, and the hash
/// of its record's attributes (kept in `THREAD_ATTRS`); leaves them zero
/// for none (no context published, no record attached, a record being
/// written, or memory out of reach: those two counted in
/// `Stat::ThreadCtxInvalid`). Read in place, the attributes in the
/// per-CPU scratch of `context`: the callers' stacks are near the
/// verifier's limit. `runtimes`: the maps that hold `pid`.
#[inline(always)]
pub fn read(pid: u32, runtimes: Runtimes, key: &mut SampleKey, context: Scratch) {
    if !runtimes.has(Runtimes::THREAD_CTX) {
        return;
    }
    let Some(record) = record(pid) else {
        return;
    };
    // SAFETY: reads user memory through the fault-tolerant helpers.
    let read = unsafe {
        bpf_probe_read_user_buf((record + TRACE_ID) as *const u8, &mut key.trace_id).is_ok()
            && bpf_probe_read_user_buf((record + SPAN_ID) as *const u8, &mut key.span_id).is_ok()
    };
    if !read {
        key.trace_id = [0; 16];
        key.span_id = [0; 8];
        maps::count(Stat::ThreadCtxInvalid, 1);
        return;
    }
    key.thread_attrs = attributes(record, context).unwrap_or(0);
}

/// The hash under which the attributes of `record` are kept; `None` for
/// none, or none readable.
#[inline(always)]
fn attributes(record: u64, context: Scratch) -> Option<u64> {
    // SAFETY: reads user memory through the fault-tolerant helper.
    let size = unsafe { bpf_probe_read_user((record + ATTRS_SIZE_AT) as *const u16) }.ok()?;
    let len = usize::from(size).min(ATTRS_MAX);
    if len == 0 {
        return None;
    }
    let attrs = maps::thread_attrs_scratch(context)?;
    // SAFETY: a per-CPU map value, valid for this program's run; programs
    // of one context do not nest on a CPU (see `Scratch`). Zeroed in
    // place, so that the hash covers zeros past the bytes read; its words
    // are `ATTRS_MAX` bytes, of which the first `len` are read into.
    unsafe {
        core::ptr::write_bytes(attrs, 0, 1);
        let bytes = core::slice::from_raw_parts_mut((*attrs).words.as_mut_ptr().cast::<u8>(), len);
        bpf_probe_read_user_buf((record + ATTRS_AT) as *const u8, bytes).ok()?;
        (*attrs).len = len as u64;
        let hash = (*attrs).hash();
        maps::keep_thread_attrs(hash, &*attrs);
        Some(hash)
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
    let entries =
        unsafe { bpf_probe_read_user((dtv.wrapping_sub(DTV_ENTRY)) as *const u64) }.ok()?;
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

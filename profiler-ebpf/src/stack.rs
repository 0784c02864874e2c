//! Stack capture: `bpf_get_stack` into a per-CPU scratch trace, stored in
//! the slot's stack map under its content hash (see `profiler_common::stack`).
use aya_ebpf::{
    EbpfContext,
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_stack, bpf_get_task_stack},
};
use core::ffi::c_void;
use profiler_common::{
    stack::{MAX_STACK_DEPTH, NO_STACK, StackTrace, stack_hash},
    stats::Stat,
};

use crate::maps::{self, Scratch, Slot};

const EFAULT: i32 = 14;
pub const ENOMEM: i32 = 12;
#[expect(clippy::cast_possible_truncation, reason = "1016 bytes")]
const STACK_BYTES: u32 = (MAX_STACK_DEPTH * 8) as u32;

/// Captures the current thread's stack (`flags` selects user or kernel)
/// in the scratch entry of `context`. See [`capture`] for the result.
#[inline(always)]
pub fn capture_current<C: EbpfContext>(
    ctx: &C,
    slot: &Slot,
    flags: u64,
    error_stat: Stat,
    context: Scratch,
) -> (u64, i32) {
    capture(slot, error_stat, context, |buf| {
        // SAFETY: `buf` is a writable buffer of STACK_BYTES (see `capture`).
        unsafe { bpf_get_stack(ctx.as_ptr(), buf, STACK_BYTES, flags) }
    })
}

/// Captures the kernel stack of `task`, a thread that is not running (its
/// user stack cannot be read from another thread's context), from a
/// tracepoint.
#[inline(always)]
pub fn capture_task_kernel(task: *mut c_void, slot: &Slot) -> (u64, i32) {
    capture(slot, Stat::KernelStackErrors, Scratch::Tracing, |buf| {
        // SAFETY: `task` is a task_struct pointer the tracepoint handed us
        // and `buf` is a writable buffer of STACK_BYTES (see `capture`).
        unsafe { bpf_get_task_stack(task.cast(), buf, STACK_BYTES, 0) }
    })
}

/// Runs `get_stack` into the per-CPU scratch trace of `context` and stores the trace in
/// the slot's stack map. Returns (hash, 0), (`NO_STACK`, 0) when there is no
/// such context, or (`NO_STACK`, -errno) when capture failed; failures are
/// counted in `error_stat` (or `StackMapFull`).
#[inline(always)]
fn capture(
    slot: &Slot,
    error_stat: Stat,
    context: Scratch,
    get_stack: impl FnOnce(*mut c_void) -> i64,
) -> (u64, i32) {
    let Some(trace) = maps::stack_scratch(context) else {
        return (NO_STACK, -ENOMEM);
    };
    // SAFETY: `trace` points at this CPU's scratch entry, valid for the
    // program's run; `ips` is exactly STACK_BYTES long.
    let bytes = get_stack(unsafe { (&raw mut (*trace).ips).cast() });
    if bytes < 0 {
        #[expect(clippy::cast_possible_truncation, reason = "errnos are small")]
        let err = bytes as i32;
        if err == -EFAULT {
            return (NO_STACK, 0);
        }
        maps::count(error_stat, 1);
        return (NO_STACK, err);
    }
    #[expect(
        clippy::cast_sign_loss,
        clippy::cast_possible_truncation,
        reason = "0..=STACK_BYTES here"
    )]
    let len = bytes as u32 / 8;
    store(slot, trace, len, 0)
}

/// Stores the first `len` frames of the scratch trace `trace` in the slot's
/// stack map under their hash; `flags` as in `StackTrace::flags`.
#[inline(always)]
pub fn store(slot: &Slot, trace: *mut StackTrace, len: u32, flags: u32) -> (u64, i32) {
    if len == 0 {
        return (NO_STACK, 0);
    }
    // SAFETY: `trace` is this CPU's scratch entry, valid for the program's
    // run and only used by this CPU.
    let hash = unsafe {
        (*trace).len = len;
        (*trace).flags = flags;
        // A truncated stack never shares its entry with a whole one.
        match stack_hash(&(*trace).ips, len as usize) ^ u64::from(flags) {
            NO_STACK => 1,
            hash => hash,
        }
    };
    if slot.stacks.get_ptr(hash).is_some() {
        return (hash, 0);
    }
    // SAFETY: `trace` is valid (see above) and not written while borrowed.
    let trace = unsafe { &*trace };
    // Passed by reference: a 1 KiB copy would not fit the 512-byte BPF stack.
    match slot.stacks.insert(hash, trace, u64::from(BPF_NOEXIST)) {
        Ok(()) => {
            maps::count(Stat::StackEntries, 1);
            (hash, 0)
        }
        // Another CPU stored the same stack first.
        Err(err) if err == -maps::EEXIST => (hash, 0),
        Err(err) => {
            maps::count(Stat::of_refusal(err, Stat::StackMapFull), 1);
            (NO_STACK, err)
        }
    }
}

//! User stacks walked in the kernel from the daemon's unwind tables
//! (`profiler_common::unwind`), by frame pointer where a PC has no table.
//!
//! The walk is a small state machine run by one `bpf_loop`: each iteration
//! does one thing (start a frame, one probe of the mapping search, one
//! probe of the row search), so the verifier checks one short callback
//! instead of nested loops whose paths multiply.
//!
//! The walk starts from the thread's saved user registers
//! (`bpf_task_pt_regs(current)`), which are the interrupted user context
//! for an on-CPU sample and the context the thread entered the kernel with
//! (system call, page fault, preemption) when off-CPU weight is flushed.
use aya_ebpf::helpers::{
    bpf_probe_read_kernel, bpf_probe_read_user,
    generated::{bpf_get_current_task_btf, bpf_loop, bpf_task_pt_regs},
};
use core::ffi::c_void;
use profiler_common::{
    stack::{NO_STACK, StackTrace, TRUNCATED},
    stats::Stat,
    unwind::{
        MAPPING_SEARCH_STEPS, MAX_FRAMES, MAX_MAPPINGS, ROW_SEARCH_STEPS, Regs, RowKind, Step,
        found, narrow, probe, step,
    },
};

use crate::{
    maps::{self, Scratch, Slot},
    stack,
};

/// Offsets in x86-64 `struct pt_regs` (a stable ABI).
const PT_REGS_RBP: usize = 32;
const PT_REGS_RIP: usize = 128;

/// Iterations of the walk: per frame, one to start it and at most one per
/// probe of each search.
const MAX_ITERATIONS: u32 = MAX_FRAMES * (2 + MAPPING_SEARCH_STEPS + ROW_SEARCH_STEPS);

/// What the next iteration does.
const START_FRAME: u32 = 0;
const SEARCH_MAPPING: u32 = 1;
const SEARCH_ROW: u32 = 2;

/// The walk's state between iterations (per CPU: `bpf_loop` callbacks see
/// only what a map holds).
#[repr(C)]
pub struct WalkState {
    pub pc: u64,
    pub sp: u64,
    pub bp: u64,
    /// The PC looked up for the current frame (`pc`, or `pc - 1` for a
    /// return address).
    pub lookup: u64,
    /// Row PC of `lookup` once its mapping is known.
    pub rel: u64,
    pub pid: u32,
    /// Non-zero when `pc` is exact (frame 0, or after a signal frame).
    pub exact_pc: u32,
    pub phase: u32,
    /// The search's open range `[lo, hi)`.
    pub lo: u32,
    pub hi: u32,
    pub first_row: u32,
    pub len: u32,
    pub truncated: u32,
    pub by_table: u32,
    pub by_frame_pointer: u32,
    pub without_table: u32,
    pub pad: u32,
}

/// Walks the current thread's user stack of process `pid` into the slot's
/// stack map, in the scratch entries of `context`. Returns (hash, 0),
/// (`NO_STACK`, 0) for a thread with no user context (a kernel thread), or
/// (`NO_STACK`, -errno).
#[inline(always)]
pub fn capture_user(slot: &Slot, pid: u32, context: Scratch) -> (u64, i32) {
    let mut context = context as u32;
    let Some((state, trace)) = maps::walk_scratch(context) else {
        return (NO_STACK, -stack::ENOMEM);
    };
    let Some(regs) = user_regs() else {
        return (NO_STACK, 0);
    };
    // SAFETY: `state` is this CPU's entry of a per-CPU array, valid for the
    // program's run; nothing else on this CPU uses it meanwhile.
    unsafe {
        *state = WalkState {
            pc: regs.pc,
            sp: regs.sp,
            bp: regs.bp,
            lookup: 0,
            rel: 0,
            pid,
            exact_pc: 1,
            phase: START_FRAME,
            lo: 0,
            hi: 0,
            first_row: 0,
            len: 0,
            truncated: 0,
            by_table: 0,
            by_frame_pointer: 0,
            without_table: 0,
            pad: 0,
        };
    }
    let callback: extern "C" fn(u64, *mut c_void) -> i64 = walk_one;
    // SAFETY: `callback` is a static function with bpf_loop's callback
    // signature; its context is `context`, on this stack for the loop.
    unsafe {
        bpf_loop(
            MAX_ITERATIONS,
            callback as *mut c_void,
            (&raw mut context).cast(),
            0,
        )
    };
    // SAFETY: as above; the loop has finished with it.
    let state = unsafe { &*state };
    maps::count(Stat::FramesByTable, u64::from(state.by_table));
    maps::count(
        Stat::FramesByFramePointer,
        u64::from(state.by_frame_pointer),
    );
    maps::count(Stat::PcsWithoutTable, u64::from(state.without_table));
    let flags = if state.truncated == 0 {
        0
    } else {
        maps::count(Stat::StacksTruncated, 1);
        TRUNCATED
    };
    stack::store(slot, trace, state.len, flags)
}

/// The current thread's saved user registers; `None` when it has no user
/// context.
#[inline(always)]
fn user_regs() -> Option<Regs> {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a kernel pointer returned as a long"
    )]
    // SAFETY: both helpers take the current task's BTF pointer and have no
    // other preconditions; a null result is handled below.
    let regs = unsafe { bpf_task_pt_regs(bpf_get_current_task_btf()) } as usize;
    if regs == 0 {
        return None;
    }
    // SAFETY: reads of kernel memory through the fault-tolerant helper.
    let (tail, bp) = unsafe {
        (
            bpf_probe_read_kernel((regs + PT_REGS_RIP) as *const [u64; 4]).ok()?,
            bpf_probe_read_kernel((regs + PT_REGS_RBP) as *const u64).ok()?,
        )
    };
    // rip, cs, eflags, rsp; a user context runs in ring 3.
    let [pc, cs, _, sp] = tail;
    (cs & 3 == 3).then_some(Regs { pc, sp, bp })
}

/// One iteration of the walk; returns 1 to stop the loop. `context`
/// points at the walk's [`Scratch`] number.
extern "C" fn walk_one(_index: u64, context: *mut c_void) -> i64 {
    // SAFETY: `capture_user` passes a pointer to a u32 on its stack, alive
    // for the whole loop.
    let context = unsafe { *context.cast::<u32>() };
    let Some((state, trace)) = maps::walk_scratch(context) else {
        return 1;
    };
    // SAFETY: both are this CPU's per-CPU entries, valid for the program's
    // run and used only by this walk.
    let (state, trace) = unsafe { (&mut *state, &mut *trace) };
    let go_on = match state.phase {
        START_FRAME => start_frame(state, trace),
        SEARCH_MAPPING => search_mapping(state),
        _ => search_row(state),
    };
    i64::from(!go_on)
}

/// Records the current PC and starts looking for its mapping.
#[inline(always)]
fn start_frame(state: &mut WalkState, trace: &mut StackTrace) -> bool {
    let i = state.len as usize;
    if i >= MAX_FRAMES as usize {
        return false;
    }
    trace.ips[i] = state.pc;
    state.len += 1;
    if !maps::unwind_tables() {
        // No tables to look up, but the symbolizer wants the mappings of
        // a process read while it lives: ask once per process (and exec).
        if i == 0 && maps::process_mappings(state.pid).is_none() {
            maps::request_mappings(state.pid);
        }
        state.by_frame_pointer += 1;
        return unwind(state, RowKind::FramePointer, 0, 0);
    }
    state.lookup = if state.exact_pc != 0 {
        state.pc
    } else {
        state.pc.wrapping_sub(1)
    };
    let Some(procs) = maps::process_mappings(state.pid) else {
        // Not published yet: the daemon builds them within a poll.
        maps::request_mappings(state.pid);
        return without_table(state);
    };
    state.lo = 0;
    #[expect(clippy::cast_possible_truncation, reason = "256")]
    let max = MAX_MAPPINGS as u32;
    state.hi = procs.len.min(max);
    state.phase = SEARCH_MAPPING;
    true
}

/// One probe of the search for the mapping of `lookup`; when done, starts
/// the row search in its table.
#[inline(always)]
fn search_mapping(state: &mut WalkState) -> bool {
    let Some(procs) = maps::process_mappings(state.pid) else {
        return without_table(state);
    };
    if state.lo < state.hi {
        let mid = probe(state.lo, state.hi);
        let start = procs.mappings[mid as usize & (MAX_MAPPINGS - 1)].start;
        (state.lo, state.hi) = narrow(state.lo, state.hi, mid, start, state.lookup);
        return true;
    }
    let mapping = found(state.lo).map(|i| &procs.mappings[i as usize & (MAX_MAPPINGS - 1)]);
    let Some(mapping) = mapping.filter(|m| state.lookup < m.end) else {
        // Mapped since the daemon last looked (mmap, dlopen, exec).
        maps::request_mappings(state.pid);
        return without_table(state);
    };
    let rel = state.lookup.wrapping_sub(mapping.bias);
    if mapping.rows == 0 || rel > u64::from(u32::MAX) {
        return without_table(state);
    }
    state.rel = rel;
    state.first_row = mapping.first_row;
    state.lo = 0;
    state.hi = mapping.rows;
    state.phase = SEARCH_ROW;
    true
}

/// One probe of the row search; when done, unwinds the frame by its row.
#[inline(always)]
fn search_row(state: &mut WalkState) -> bool {
    if state.lo < state.hi {
        let mid = probe(state.lo, state.hi);
        let Some(row) = maps::unwind_row(state.first_row.wrapping_add(mid)) else {
            return without_table(state);
        };
        (state.lo, state.hi) = narrow(state.lo, state.hi, mid, u64::from(row.pc), state.rel);
        return true;
    }
    let row = found(state.lo).and_then(|i| maps::unwind_row(state.first_row.wrapping_add(i)));
    match row.map(|r| (RowKind::from_raw(r.kind), r.cfa_offset, r.rbp_offset)) {
        Some((kind, cfa_offset, rbp_offset)) if kind != RowKind::FramePointer => {
            state.by_table += 1;
            unwind(state, kind, cfa_offset, rbp_offset)
        }
        _ => without_table(state),
    }
}

/// Unwinds a frame with no table row, by frame pointer (counted).
#[inline(always)]
fn without_table(state: &mut WalkState) -> bool {
    state.without_table += 1;
    state.by_frame_pointer += 1;
    unwind(state, RowKind::FramePointer, 0, 0)
}

/// Moves to the caller under the rule; false at the end of the stack.
#[inline(always)]
fn unwind(state: &mut WalkState, kind: RowKind, cfa_offset: u16, rbp_offset: i8) -> bool {
    let regs = Regs {
        pc: state.pc,
        sp: state.sp,
        bp: state.bp,
    };
    state.phase = START_FRAME;
    let Some((next, exact)) = caller(kind, cfa_offset, rbp_offset, &regs) else {
        return false;
    };
    if next.pc == 0 {
        return false;
    }
    if state.len >= MAX_FRAMES {
        state.truncated = 1;
        return false;
    }
    state.pc = next.pc;
    state.sp = next.sp;
    state.bp = next.bp;
    state.exact_pc = u32::from(exact);
    true
}

/// The caller's registers, and whether its pc is exact; `None` at the end
/// of the stack or when memory cannot be read or the result is not sane.
#[inline(always)]
fn caller(kind: RowKind, cfa_offset: u16, rbp_offset: i8, regs: &Regs) -> Option<(Regs, bool)> {
    match step(kind, cfa_offset, rbp_offset, regs) {
        Step::End => None,
        Step::Frame { cfa, ra_at, bp_at } => {
            if kind == RowKind::FramePointer && regs.bp == 0 {
                return None;
            }
            // The stack grows down: a caller's frame is above its callee's.
            if cfa <= regs.sp {
                return None;
            }
            let pc = read_user(ra_at)?;
            let bp = match bp_at {
                Some(at) => read_user(at)?,
                None => regs.bp,
            };
            Some((Regs { pc, sp: cfa, bp }, false))
        }
        Step::Signal {
            pc_at,
            sp_at,
            bp_at,
        } => Some((
            Regs {
                pc: read_user(pc_at)?,
                sp: read_user(sp_at)?,
                bp: read_user(bp_at)?,
            },
            true,
        )),
    }
}

#[inline(always)]
fn read_user(at: u64) -> Option<u64> {
    // SAFETY: reads user memory through the fault-tolerant helper.
    unsafe { bpf_probe_read_user(at as *const u64).ok() }
}

//! User stacks walked in the kernel from the daemon's unwind tables
//! (`profiler_common::unwind`), by frame pointer where a PC has no table.
//!
//! The walk runs in one `bpf_loop`, one frame per iteration: the frame's
//! mapping is found by a binary search of the process's mappings (one hash
//! lookup), its row by a binary search of the rows of one bucket of the
//! binary's table (array lookups: two index entries, then a few rows in a
//! few cache lines), and the caller's registers follow from the row.
//!
//! The walk starts from the thread's saved user registers
//! (`bpf_task_pt_regs(current)`): the context the thread entered the
//! kernel with (system call, page fault, preemption) when off-CPU weight
//! is flushed, and for an on-CPU sample in the kernel; an on-CPU sample
//! that interrupted user mode hands over its context's registers, the
//! same ones, without the helper calls.
use aya_ebpf::helpers::{
    bpf_get_current_pid_tgid, bpf_probe_read_kernel, bpf_probe_read_user,
    generated::{bpf_get_current_task_btf, bpf_loop, bpf_task_pt_regs},
};
use core::ffi::c_void;
use profiler_common::{
    process::{ASK_LATER, ASK_NOW},
    python::gil,
    runtimes::Runtimes,
    stack::{NO_STACK, StackTrace, TRUNCATED},
    stats::Stat,
    unwind::{
        MAPPING_SEARCH_STEPS, MAX_FRAMES, MAX_MAPPINGS, ROW_SEARCH_STEPS, Regs, RowKind, Step,
        UnwindMapping, UnwindRow, WalkState, bucket_of, bucket_rows, search_in, step,
    },
};

use crate::{
    java,
    maps::{self, Scratch, Slot},
    process_seen,
    python::{self, At},
    stack, vma,
};

/// Offsets in x86-64 `struct pt_regs` (a stable ABI).
const PT_REGS_RBP: usize = 32;
const PT_REGS_RIP: usize = 128;

/// Walks the current thread's user stack of process `pid` into the slot's
/// stack map, in the scratch entries of `context`. Returns (hash, 0),
/// (`NO_STACK`, 0) for a thread with no user context (a kernel thread), or
/// (`NO_STACK`, -errno); and in a Python thread whether it held the GIL
/// (`profiler_common::python::gil`).
#[inline(always)]
pub fn capture_user(
    slot: &Slot,
    pid: u32,
    runtimes: Runtimes,
    context: Scratch,
) -> (u64, i32, u32) {
    capture_user_from(slot, pid, runtimes, context, None)
}

/// As [`capture_user`], from `regs` when the caller has the user registers
/// (an on-CPU sample that interrupted user mode: its context's), else from
/// the thread's saved ones.
#[inline(always)]
pub fn capture_user_from(
    slot: &Slot,
    pid: u32,
    runtimes: Runtimes,
    context: Scratch,
    regs: Option<Regs>,
) -> (u64, i32, u32) {
    let mut context = context as u32;
    let Some((state, trace)) = maps::walk_scratch(context) else {
        return (NO_STACK, -stack::ENOMEM, gil::UNKNOWN);
    };
    let Some(regs) = regs.or_else(user_regs) else {
        return (NO_STACK, 0, gil::UNKNOWN);
    };
    // SAFETY: `state` is this CPU's entry of a per-CPU array, valid for the
    // program's run; nothing else on this CPU uses it meanwhile.
    // Field by field: a whole `WalkState` built on the BPF stack would
    // take 300 bytes of the 6.1 verifier's 512 for the call chain. The
    // Python part is set by `python::start`.
    unsafe {
        let state = &mut *state;
        state.pc = regs.pc;
        state.sp = regs.sp;
        state.bp = regs.bp;
        state.mapping = UnwindMapping::default();
        state.pid = pid;
        state.exact_pc = 1;
        state.lo = 0;
        state.hi = 0;
        state.len = 0;
        state.truncated = 0;
        state.by_table = 0;
        state.by_frame_pointer = 0;
        state.without_table = 0;
        state.by_file = 0;
        state.ask_mappings = 0;
        state.phase = phase::RECORD;
        python::start(&mut state.python, pid, runtimes);
        java::start(&mut state.java, pid, runtimes);
    }
    let callback: extern "C" fn(u64, *mut c_void) -> i64 = walk_one;
    // SAFETY: `callback` is a static function with bpf_loop's callback
    // signature; its context is `context`, on this stack for the loop.
    unsafe {
        // Three steps a frame, and twice the frames: an iteration at a
        // Python activation's end records nothing.
        bpf_loop(
            MAX_FRAMES * 6,
            callback as *mut c_void,
            (&raw mut context).cast(),
            0,
        )
    };
    // SAFETY: as above; the loop has finished with it.
    let state = unsafe { &*state };
    if state.ask_mappings != 0 {
        request_mappings(pid, context, state.ask_mappings == ASK_LATER);
    }
    maps::count(Stat::FramesByTable, u64::from(state.by_table));
    maps::count(
        Stat::FramesByFramePointer,
        u64::from(state.by_frame_pointer),
    );
    maps::count(Stat::PcsWithoutTable, u64::from(state.without_table));
    if state.by_file != 0 {
        maps::count(Stat::MappingsByFile, u64::from(state.by_file));
        maps::count(Stat::StacksByFile, 1);
    }
    java::finish(&state.java);
    let flags = if state.truncated == 0 {
        0
    } else {
        maps::count(Stat::StacksTruncated, 1);
        TRUNCATED
    };
    let (hash, err) = stack::store(slot, trace, state.len, flags);
    (hash, err, state.python.gil)
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

/// One iteration of the walk: one frame; returns 1 to stop the loop.
/// `context` points at the walk's [`Scratch`] number.
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
    i64::from(!frame(state, trace, context))
}

/// A thread exits (after its last flush): when it leads its process, the
/// process's request for mappings, if one waits, says so: the daemon
/// reads nothing of a process gone.
pub fn on_exit() {
    let pid_tgid = bpf_get_current_pid_tgid();
    #[expect(clippy::cast_possible_truncation, reason = "the low half is the tid")]
    let (pid, tid) = ((pid_tgid >> 32) as u32, pid_tgid as u32);
    if pid == tid {
        maps::mark_request_exited(pid);
    }
}

/// Asks the daemon for the mappings of `pid`, with what the process's
/// own thread sees of it; `deferrable` when the walk found a table for
/// every frame outside them. After the walk and out of line, a frame of
/// its own: inside the walk's callback its reads would grow the frame
/// Linux 6.1's verifier adds to those of the walk's callers, within 512
/// bytes for a whole chain (`profiler-userspace/src/bpf/stack_tests.rs`).
#[inline(never)]
fn request_mappings(pid: u32, context: u32, deferrable: bool) {
    maps::request_mappings(pid, context, deferrable, |seen| {
        process_seen::current(pid, seen);
    });
}

/// One step of the walk at the current PC, as `state.phase` says: record
/// it ([`record`]), find its mapping ([`find_mapping`]), or find its row
/// and move to the caller ([`find_row`]); false at the end of the walk.
///
/// One step per iteration, each starting from what the map holds: the
/// verifier checks each step once for the loop's one entry state. Run as
/// one, each step was checked again for every way the one before it could
/// end, and newer verifiers (6.18's stable updates) refused the product
/// at a million instructions.
#[inline(always)]
fn frame(state: &mut WalkState, trace: &mut StackTrace, context: u32) -> bool {
    match state.phase {
        phase::MAPPING => find_mapping(state, context),
        phase::ROW => find_row(state),
        _ => record(state, trace, context),
    }
}

/// The steps of the walk at one PC (`WalkState::phase`).
mod phase {
    /// Records the PC, or the runtime's frames at it.
    pub const RECORD: u32 = 0;
    /// Finds the PC's mapping.
    pub const MAPPING: u32 = 1;
    /// Finds its row, and moves to the caller by it.
    pub const ROW: u32 = 2;
}

/// The PC to look up: the current one, or for a caller (whose PC is a
/// return address) the call instruction's last byte.
#[inline(always)]
fn lookup_pc(state: &WalkState) -> u64 {
    if state.exact_pc != 0 {
        state.pc
    } else {
        state.pc.wrapping_sub(1)
    }
}

/// Records the current PC (or in a Python eval loop, the Python frames
/// it runs: `python.rs`; in a JVM's code cache, its Java frame:
/// `java.rs`), then moves to its caller by frame pointer without tables,
/// or goes on to find its mapping.
#[inline(always)]
fn record(state: &mut WalkState, trace: &mut StackTrace, context: u32) -> bool {
    let i = state.len as usize;
    if i >= MAX_FRAMES as usize {
        return false;
    }
    let lookup = lookup_pc(state);
    if let Some(more) = java::at(state, trace, lookup) {
        return more;
    }
    match python::at(state, trace, lookup, context) {
        At::Native => {
            trace.ips[i] = state.pc;
            state.len += 1;
        }
        At::Recorded => return true,
        At::Replaced => {}
        At::Full => return false,
    }
    if !maps::unwind_tables() {
        // No tables to look up, but the symbolizer wants the mappings of
        // a process read while it lives: ask once per process (and exec).
        if i == 0 && maps::process_mappings(state.pid).is_none() {
            state.ask_mappings = ASK_NOW;
        }
        state.by_frame_pointer += 1;
        return unwind(state, RowKind::FramePointer, 0, 0);
    }
    // A caller is most often in its callee's mapping: then its row next.
    let mapping = &state.mapping;
    state.phase = if mapping.start <= lookup && lookup < mapping.end {
        phase::ROW
    } else {
        phase::MAPPING
    };
    true
}

/// Finds the current PC's mapping into `state.mapping`, then goes on to
/// its row; without one (or without rows), moves to the caller by frame
/// pointer.
#[inline(always)]
fn find_mapping(state: &mut WalkState, context: u32) -> bool {
    let lookup = lookup_pc(state);
    let Some(mapping) = mapping_of(state, lookup).or_else(|| {
        // Not published yet, or mapped since the daemon last looked
        // (mmap, dlopen, exec): the daemon builds them within a poll.
        // Meanwhile the kernel's own mapping may be of a file whose
        // table is published: a new process's, a library just loaded, a
        // process published at its exec before its libraries were mapped
        // (`--comm`). Code outside files (JIT) found here is in a mapping
        // the daemon publishes, with no table, at its next request. A
        // process all of whose frames are found so, in files no runtime
        // the daemon reads found its own in, may not live to be read: the
        // daemon may wait before it reads it.
        let Some((mapping, may_wait)) = vma::by_file(state, lookup, context) else {
            state.ask_mappings |= ASK_NOW;
            return None;
        };
        state.ask_mappings |= if may_wait && mapping.rows() != 0 {
            ASK_LATER
        } else {
            ASK_NOW
        };
        state.mapping = mapping;
        state.by_file += 1;
        Some(mapping)
    }) else {
        return without_table(state);
    };
    if mapping.rows() == 0 {
        return without_table(state);
    }
    state.phase = phase::ROW;
    true
}

/// Moves to the caller by the current PC's row in `state.mapping`'s
/// table; by frame pointer when it has none, or its row says so.
#[inline(always)]
fn find_row(state: &mut WalkState) -> bool {
    let mapping = state.mapping;
    let Ok(rel) = u32::try_from(lookup_pc(state).wrapping_sub(mapping.bias)) else {
        return without_table(state);
    };
    if mapping.rows() == 0 {
        return without_table(state);
    }
    match row_of(state, &mapping, rel)
        .map(|r| (RowKind::from_raw(r.kind), r.cfa_offset, r.rbp_offset))
    {
        Some((kind, cfa_offset, rbp_offset)) if kind != RowKind::FramePointer => {
            state.by_table += 1;
            unwind(state, kind, cfa_offset, rbp_offset)
        }
        _ => without_table(state),
    }
}

/// The mapping of the walked process that holds `pc`: the last frame's,
/// or from its published mappings (a copy, as the map's entry may change
/// under the walk).
#[inline(always)]
fn mapping_of(state: &mut WalkState, pc: u64) -> Option<UnwindMapping> {
    if state.mapping.start <= pc && pc < state.mapping.end {
        return Some(state.mapping);
    }
    let procs = maps::process_mappings(state.pid)?;
    #[expect(clippy::cast_possible_truncation, reason = "256")]
    let len = procs.len.min(MAX_MAPPINGS as u32);
    let i = search_in(state, (0, len), pc, MAPPING_SEARCH_STEPS, |i| {
        Some(procs.mappings[i as usize & (MAX_MAPPINGS - 1)].start)
    })?;
    let mapping = procs.mappings[i as usize & (MAX_MAPPINGS - 1)];
    if pc >= mapping.end {
        return None;
    }
    state.mapping = mapping;
    Some(mapping)
}

/// The row of `mapping`'s table that covers `rel` (a PC less the
/// mapping's bias), searched within its bucket of the table's index (the
/// entries after the rows, each a row index in its `pc`).
#[inline(always)]
fn row_of(state: &mut WalkState, mapping: &UnwindMapping, rel: u32) -> Option<&'static UnwindRow> {
    let (first, rows) = (mapping.first_row, mapping.rows());
    let index = first.wrapping_add(rows);
    let bucket = bucket_of(rel, mapping.bucket_shift(), rows);
    let range = bucket_rows(rows, bucket, |b| {
        maps::unwind_row(index.wrapping_add(b)).map(|entry| entry.pc)
    })?;
    let i = search_in(state, range, u64::from(rel), ROW_SEARCH_STEPS, |i| {
        maps::unwind_row(first.wrapping_add(i)).map(|row| u64::from(row.pc))
    })?;
    maps::unwind_row(first.wrapping_add(i))
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
    state.phase = phase::RECORD;
    let regs = Regs {
        pc: state.pc,
        sp: state.sp,
        bp: state.bp,
    };
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
            // The stack grows down: a caller's frame is above its callee's
            // (unless the callee moved to another stack).
            if cfa <= regs.sp && kind != RowKind::SwitchedStack {
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

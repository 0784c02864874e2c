//! One frame of the walk (`super::walk_one` runs one step of it per
//! iteration): the PC recorded, or the runtime's frames at it; its
//! mapping, by a binary search of the process's published mappings or its
//! file's table (`vma.rs`); its row, by a binary search of one bucket of
//! the table; and the caller's registers by the row, or by frame pointer.
use aya_ebpf::helpers::bpf_probe_read_user;
use profiler_common::{
    process::{ASK_LATER, ASK_NOW},
    stack::StackTrace,
    unwind::{
        MAPPING_SEARCH_STEPS, MAX_FRAMES, MAX_MAPPINGS, ROW_SEARCH_STEPS, Regs, RowKind, Step,
        UnwindMapping, UnwindRow, WalkState, bucket_of, bucket_rows, search_in, step,
    },
};

use crate::{
    java, maps,
    python::{self, At},
    vma,
};

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
pub(super) fn frame(state: &mut WalkState, trace: &mut StackTrace, context: u32) -> bool {
    match state.phase {
        phase::MAPPING => find_mapping(state, context),
        phase::ROW => find_row(state),
        _ => record(state, trace, context),
    }
}

/// The steps of the walk at one PC (`WalkState::phase`).
pub(super) mod phase {
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

//! Java frames in the user stack walk (see `profiler_common::java`): at a
//! PC in a JVM's code cache, the walk finds the code blob that holds it,
//! records a compiled or interpreted Java frame (or the stub's PC), and
//! moves to the caller by the blob's frame size or the frame pointer, as
//! the JVM's own `frame::sender` does on x86-64.
use aya_ebpf::helpers::generated::bpf_probe_read_user as probe_read_user_raw;
use core::ffi::c_void;
use profiler_common::{
    frames::{JAVA_FRAME, JAVA_INTERPRETED, java_detail},
    java::{CODE_HEAPS_MAX, JavaWalk, SEGMAP_FREE, SEGMAP_STEPS, blob_kind, interpreter_frame},
    runtimes::Runtimes,
    stack::StackTrace,
    stats::Stat,
    unwind::{MAX_FRAMES, WalkState},
};

use crate::maps;

/// How far above SP an interpreter frame's frame pointer may be at the
/// walk's first frame: farther, the frame is not set up (or FP is not
/// one), and the frame is not read.
const INTERPRETER_FP_REACH: u64 = 0x4000;

/// Sets up the Java part of a walk of process `pid`, which is in the maps
/// of `runtimes`.
#[inline(always)]
pub fn start(java: &mut JavaWalk, pid: u32, runtimes: Runtimes) {
    java.frames = 0;
    if let Some(process) = runtimes
        .has(Runtimes::JAVA)
        .then(|| maps::java_process(pid))
        .flatten()
    {
        java.process = *process;
    } else {
        java.process.code_lo = 0;
        java.process.code_hi = 0;
    }
}

/// The Java frames this walk recorded, counted at its end.
#[inline(always)]
pub fn finish(java: &JavaWalk) {
    if java.frames != 0 {
        maps::count(Stat::JavaFrames, u64::from(java.frames));
    }
}

/// The step at a frame whose lookup PC is `pc`: `None` when the PC is not
/// in a code blob of the process's code cache (the native walk goes on),
/// else whether the walk goes on after this frame.
#[inline(always)]
pub fn at(state: &mut WalkState, trace: &mut StackTrace, pc: u64) -> Option<bool> {
    let java = &mut state.java;
    if pc < java.process.code_lo || pc >= java.process.code_hi {
        return None;
    }
    if !find_blob(java, pc) || !read_blob(java) {
        maps::count(Stat::JavaBlobsNotFound, 1);
        return None;
    }
    let kind = state.java.kind;
    Some(
        if kind == blob_kind::NMETHOD || kind == blob_kind::NATIVE_NMETHOD {
            compiled(state, trace)
        } else if kind == blob_kind::INTERPRETER {
            interpreted(state, trace)
        } else {
            stub(state, trace)
        },
    )
}

/// Finds the blob holding `pc` through its code heap's segment map into
/// `java.blob`; false when `pc` is in no heap's blobs, or in a free block.
#[inline(always)]
fn find_blob(java: &mut JavaWalk, pc: u64) -> bool {
    let heaps = usize::from(java.process.layout.heaps).min(CODE_HEAPS_MAX);
    java.segmap = 0;
    for i in 0..CODE_HEAPS_MAX {
        let heap = &java.process.heaps[i];
        if i < heaps && heap.low <= pc && pc < heap.high {
            java.heap_low = heap.low;
            java.segmap = heap.segmap;
            break;
        }
    }
    if java.segmap == 0 {
        return false;
    }
    let shift = u64::from(java.process.layout.segment_shift & 31);
    java.segment = (pc - java.heap_low) >> shift;
    for _ in 0..SEGMAP_STEPS {
        let at = java.segmap.wrapping_add(java.segment);
        if !read_into(&mut java.tag, at) {
            return false;
        }
        let tag = u64::from(java.tag);
        if tag == 0 {
            java.blob = java.heap_low
                + (java.segment << shift)
                + u64::from(java.process.layout.heap_block_size);
            return true;
        }
        if tag == u64::from(SEGMAP_FREE) || tag > java.segment {
            return false;
        }
        java.segment -= tag;
    }
    false
}

/// Reads what the walk needs of `java.blob`: its kind (its name's first
/// four bytes), frame size, frame-complete offset, code start and, for a
/// compiled method, its compilation's id.
#[inline(always)]
fn read_blob(java: &mut JavaWalk) -> bool {
    let blob = java.blob;
    let layout = &java.process.layout;
    let (name_at, size_at, complete_at, begin_at, id_at) = (
        blob + u64::from(layout.blob_name),
        blob + u64::from(layout.blob_frame_size),
        blob + u64::from(layout.blob_frame_complete),
        blob + u64::from(layout.blob_code_begin),
        blob + u64::from(layout.nmethod_compile_id),
    );
    if !(read_into(&mut java.name, name_at)
        && read_into(&mut java.kind, java.name)
        && read_into(&mut java.frame_size, size_at)
        && read_into(&mut java.frame_complete, complete_at)
        && read_into(&mut java.code_begin, begin_at))
    {
        return false;
    }
    let layout = &java.process.layout;
    if layout.blob_code_is_offset != 0 {
        java.code_begin = blob + (java.code_begin & 0xffff_ffff);
    }
    if layout.blob_frame_complete_16 != 0 {
        java.frame_complete &= 0xffff;
    }
    java.compile_id = 0;
    if java.kind == blob_kind::NMETHOD || java.kind == blob_kind::NATIVE_NMETHOD {
        return read_into(&mut java.compile_id, id_at);
    }
    true
}

/// A compiled method's frame: recorded as its `nmethod` and instruction
/// offset,
/// unwound by its frame size (the return address and the saved frame
/// pointer are its top two words). At the walk's first frame, a PC in the
/// prologue or epilogue has less pushed: the return address found is
/// checked to be in the code cache (a compiled method is always called
/// from code there), else the words a partly built or torn down frame
/// leaves are tried.
#[inline(always)]
fn compiled(state: &mut WalkState, trace: &mut StackTrace) -> bool {
    let first = state.exact_pc != 0;
    // The offset of the instruction the frame is in: a caller's is its
    // call's, one byte before the return address.
    #[expect(clippy::cast_possible_truncation, reason = "an offset into one blob")]
    let offset = state.pc.wrapping_sub(state.java.code_begin) as u32;
    let offset = offset.wrapping_sub(u32::from(!first));
    let entry = JAVA_FRAME | state.java.blob;
    let detail = java_detail(offset, state.java.compile_id);
    if !record(state, trace, entry, detail) {
        return false;
    }
    let java = &mut state.java;
    if !first || state.pc >= java.code_begin + u64::from(java.frame_complete) {
        // The whole frame: the caller's SP is its frame size above.
        java.words[1] = state.sp + u64::from(java.frame_size) * 8;
        let (ra_at, bp_at) = (java.words[1] - 8, java.words[1] - 16);
        if read_into(&mut java.words[0], ra_at) && in_code_cache(java) {
            if !read_into(&mut java.words[2], bp_at) {
                java.words[2] = state.bp;
            }
            return to_caller(state);
        }
        if !first {
            return false;
        }
    }
    // Only the return address pushed (entry, or after `pop rbp`).
    java.words[1] = state.sp + 8;
    java.words[2] = state.bp;
    if read_into(&mut java.words[0], state.sp) && in_code_cache(java) {
        return to_caller(state);
    }
    // The frame pointer too (after `push rbp`, or before `pop rbp`).
    java.words[1] = state.sp + 16;
    if read_into(&mut java.words[0], state.sp + 8)
        && in_code_cache(java)
        && read_into(&mut java.words[2], state.sp)
    {
        return to_caller(state);
    }
    false
}

/// An interpreter frame: recorded as the `Method*` it holds and the
/// bytecode index its saved bytecode pointer gives, unwound by its frame
/// pointer (the caller's SP is saved in the frame).
#[inline(always)]
fn interpreted(state: &mut WalkState, trace: &mut StackTrace) -> bool {
    let fp = state.bp;
    if fp < state.sp || (state.exact_pc != 0 && fp >= state.sp + INTERPRETER_FP_REACH) {
        return false;
    }
    let java = &mut state.java;
    let const_method_at = u64::from(java.process.layout.method_const_method);
    if !(read_into(&mut java.words[0], slot(fp, interpreter_frame::METHOD))
        && read_into(&mut java.words[1], slot(fp, interpreter_frame::BCP)))
    {
        return false;
    }
    let at = java.words[0] + const_method_at;
    if !read_into(&mut java.words[2], at) {
        return false;
    }
    let code = java.words[2] + u64::from(java.process.layout.const_method_size);
    let bci = java.words[1].wrapping_sub(code);
    #[expect(clippy::cast_possible_truncation, reason = "checked, or a marker")]
    let bci = if bci < 0x1_0000 { bci as u32 } else { u32::MAX };
    #[expect(clippy::cast_possible_truncation, reason = "a check, truncated")]
    let check = (java.words[2] >> 3) as u32;
    let entry = JAVA_FRAME | JAVA_INTERPRETED | java.words[0];
    if !record(state, trace, entry, java_detail(bci, check)) {
        return false;
    }
    let java = &mut state.java;
    if !(read_into(&mut java.words[0], fp + 8)
        && read_into(&mut java.words[1], slot(fp, interpreter_frame::SENDER_SP))
        && read_into(&mut java.words[2], fp))
    {
        return false;
    }
    to_caller(state)
}

/// Any other blob (stubs, adapters, the call stub): its PC as a native
/// frame, unwound by its frame size, by frame pointer where it has none,
/// or past the return address alone for dispatch stubs.
#[inline(always)]
fn stub(state: &mut WalkState, trace: &mut StackTrace) -> bool {
    let len = state.len as usize;
    if len >= MAX_FRAMES as usize {
        state.truncated = 1;
        return false;
    }
    trace.ips[len] = state.pc;
    state.len += 1;
    let (sp, bp) = (state.sp, state.bp);
    let java = &mut state.java;
    let read = if java.kind == blob_kind::VTABLE || java.kind == blob_kind::ITABLE {
        java.words[1] = sp + 8;
        java.words[2] = bp;
        read_into(&mut java.words[0], sp)
    } else {
        java.words[1] = if java.frame_size == 0 {
            bp + 16
        } else {
            sp + u64::from(java.frame_size) * 8
        };
        let (ra_at, bp_at) = (java.words[1] - 8, java.words[1] - 16);
        read_into(&mut java.words[0], ra_at) && read_into(&mut java.words[2], bp_at)
    };
    read && to_caller(state)
}

/// Records a Java frame's two entries; false when the stack is full.
#[inline(always)]
fn record(state: &mut WalkState, trace: &mut StackTrace, entry: u64, detail: u64) -> bool {
    let len = state.len as usize;
    if len + 1 >= MAX_FRAMES as usize {
        state.truncated = 1;
        return false;
    }
    trace.ips[len] = entry;
    trace.ips[len + 1] = detail;
    state.len += 2;
    let pid = state.pid;
    let java = &mut state.java;
    java.frames += 1;
    java.seen.pid = pid;
    java.seen.entry = entry;
    java.seen.detail = detail;
    maps::note_java_frame(&java.seen);
    true
}

/// Moves the walk to the caller whose PC, SP and frame pointer are
/// `java.words`; false at the end of the stack (no PC, or a caller's
/// frame not above its callee's).
#[inline(always)]
fn to_caller(state: &mut WalkState) -> bool {
    let [pc, sp, bp] = state.java.words;
    if pc == 0 || sp <= state.sp {
        return false;
    }
    state.pc = pc;
    state.sp = sp;
    state.bp = bp;
    state.exact_pc = 0;
    true
}

/// Whether the PC read (`java.words[0]`) is in the code cache.
#[inline(always)]
fn in_code_cache(java: &JavaWalk) -> bool {
    java.process.code_lo <= java.words[0] && java.words[0] < java.process.code_hi
}

/// The address `words` words from frame pointer `fp`.
#[inline(always)]
fn slot(fp: u64, words: i64) -> u64 {
    fp.wrapping_add_signed(words * 8)
}

/// Reads a `T` at user address `at` straight into `dst` (map memory:
/// nothing on the BPF stack); false when it cannot be read.
#[inline(always)]
fn read_into<T>(dst: &mut T, at: u64) -> bool {
    #[expect(clippy::cast_possible_truncation, reason = "a few bytes")]
    let len = size_of::<T>() as u32;
    // SAFETY: `dst` is valid for `size_of::<T>()` bytes of writes and any
    // bit pattern is a valid `T` (plain integers); the helper tolerates
    // faults at `at`.
    unsafe {
        probe_read_user_raw(
            core::ptr::from_mut(dst).cast::<c_void>(),
            len,
            at as *const c_void,
        ) == 0
    }
}

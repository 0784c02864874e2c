//! Python frames in the user stack walk (see `profiler_common::python`):
//! at a native frame of the eval loop, the walk records that activation's
//! Python frames, one per `bpf_loop` iteration, in the loop's place.
//!
//! The thread's current frame is found from its thread state: the one in
//! the main interpreter's list whose `thread_id` (`pthread_self()`) is the
//! thread's `fsbase`, cached per thread in `PYTHON_THREADS`.
use aya_ebpf::helpers::{
    bpf_get_current_pid_tgid, bpf_probe_read_user,
    generated::bpf_probe_read_user as probe_read_user_raw,
};
use profiler_common::{
    frames::{PYTHON_FRAME, PYTHON_TORN, python_detail},
    python::{
        FRAME_OWNED_BY_CSTACK, FRAME_READ_MAX, FrameChain, KernelLayout, NO_OFFSET, PythonProcess,
        PythonWalk, THREAD_SCAN_MAX, gil, phase,
    },
    runtimes::Runtimes,
    stack::StackTrace,
    stats::Stat,
    unwind::{MAX_FRAMES, WalkState},
};

use crate::{maps, tls};

/// What the walk does at its current native frame.
pub enum At {
    /// Not the eval loop (or no Python frames to record): the native frame.
    Native,
    /// A Python frame was recorded: the same native frame comes again.
    Recorded,
    /// The activation's frames are recorded: unwind the eval loop's frame
    /// without recording it.
    Replaced,
    /// The stack is full.
    Full,
}

/// Sets up the Python part of a walk of process `pid`, which is in the
/// maps of `runtimes`.
#[inline(always)]
pub fn start(python: &mut PythonWalk, pid: u32, runtimes: Runtimes) {
    python.cursor = 0;
    python.recorded = 0;
    python.gil = gil::UNKNOWN;
    if let Some(process) = runtimes
        .has(Runtimes::PYTHON)
        .then(|| maps::python_process(pid))
        .flatten()
    {
        python.process = *process;
        python.phase = phase::UNSEEN;
    } else {
        python.process.eval_end = 0;
        python.phase = phase::OFF;
    }
}

/// The step at a native frame whose lookup PC is `pc`.
#[inline(always)]
pub fn at(state: &mut WalkState, trace: &mut StackTrace, pc: u64, context: u32) -> At {
    let python = &mut state.python;
    if python.phase == phase::OFF || pc < python.process.eval_start || pc >= python.process.eval_end
    {
        return At::Native;
    }
    if python.phase == phase::UNSEEN {
        let Some((frame, holds)) = current_frame(&python.process) else {
            maps::count(Stat::PythonThreadsNotFound, 1);
            python.phase = phase::OFF;
            return At::Native;
        };
        python.cursor = frame;
        python.phase = phase::BETWEEN;
        python.gil = holds;
    }
    if python.phase == phase::ENDING {
        python.phase = phase::BETWEEN;
        return At::Replaced;
    }
    if python.phase == phase::BETWEEN {
        python.phase = phase::IN_ACTIVATION;
        python.recorded = 0;
    }
    record_next(state, trace, context)
}

/// Records the activation's next frame, or ends the activation.
#[inline(always)]
fn record_next(state: &mut WalkState, trace: &mut StackTrace, context: u32) -> At {
    let python = &mut state.python;
    let Some(chain) = FrameChain::from_raw(python.process.layout.chain) else {
        python.phase = phase::OFF;
        return At::Native;
    };
    if python.cursor == 0 {
        return end_activation(python);
    }
    if !read_frame(python, context) {
        return torn(state, trace);
    }
    if chain == FrameChain::OwnerShim && python.owner == u32::from(FRAME_OWNED_BY_CSTACK) {
        python.cursor = python.previous;
        return end_activation(python);
    }
    let first_line_at = python
        .code
        .wrapping_add(u64::from(python.process.layout.code_first_line));
    let Some(first_line) = read_user::<u32>(first_line_at) else {
        return torn(state, trace);
    };
    // Read here, right before its bounds check and the writes it guards:
    // held across the reads above, the value is spilled, and the 6.1
    // verifier loses the bound between the check and the writes.
    let len = state.len as usize;
    if len + 1 >= MAX_FRAMES as usize {
        state.truncated = 1;
        return At::Full;
    }
    let python = &mut state.python;
    trace.ips[len] = PYTHON_FRAME | python.code;
    trace.ips[len + 1] = python_detail(python.instr, first_line);
    state.len += 2;
    maps::count(Stat::PythonFrames, 1);
    let python = &mut state.python;
    python.seen.pid = state.pid;
    python.seen.first_line = first_line;
    python.seen.code = python.code;
    maps::note_python_code(&python.seen);
    python.recorded += 1;
    python.cursor = python.previous;
    let last = match chain {
        FrameChain::OnePerCall => true,
        FrameChain::EntryFlag => python.owner != 0,
        FrameChain::OwnerShim => false,
    };
    if last {
        python.phase = phase::ENDING;
    }
    At::Recorded
}

/// The activation has no frame left: its frames stand for the eval loop's
/// native frame, which stays when it had none.
#[inline(always)]
fn end_activation(python: &mut PythonWalk) -> At {
    python.phase = phase::BETWEEN;
    if python.recorded == 0 {
        At::Native
    } else {
        At::Replaced
    }
}

/// A frame could not be read: `[truncated]` after the frames read, and
/// the rest of the stack native.
#[inline(always)]
fn torn(state: &mut WalkState, trace: &mut StackTrace) -> At {
    maps::count(Stat::PythonChainsTorn, 1);
    state.python.phase = phase::OFF;
    let len = state.len as usize;
    if len >= MAX_FRAMES as usize {
        state.truncated = 1;
        return At::Full;
    }
    trace.ips[len] = PYTHON_TORN;
    state.len += 1;
    At::Recorded
}

/// Reads the frame at `python.cursor` (one read of its first bytes) into
/// `python`'s frame fields; false when it cannot be read.
#[inline(always)]
fn read_frame(python: &mut PythonWalk, context: u32) -> bool {
    let Some(buf) = maps::python_scratch(context) else {
        return false;
    };
    let layout = &python.process.layout;
    #[expect(clippy::cast_possible_truncation, reason = "128")]
    let len = u32::from(layout.frame_read).clamp(8, FRAME_READ_MAX as u32);
    // SAFETY: `buf` is this CPU's scratch entry of FRAME_READ_MAX bytes and
    // `len` is at most that; the helper tolerates faults.
    let read = unsafe { probe_read_user_raw(buf.cast(), len, python.cursor as *const _) };
    if read != 0 {
        return false;
    }
    // SAFETY: as above; only this walk uses the entry.
    let bytes = unsafe { &*buf };
    let (Some(code), Some(previous), Some(instr)) = (
        field_u64(bytes, layout.frame_code),
        field_u64(bytes, layout.frame_previous),
        field_u64(bytes, layout.frame_instr),
    ) else {
        return false;
    };
    #[expect(
        clippy::cast_possible_truncation,
        reason = "an offset into the code object"
    )]
    let instr = if FrameChain::from_raw(layout.chain) == Some(FrameChain::OnePerCall) {
        instr as u32
    } else {
        instr.wrapping_sub(code) as u32
    };
    let owner = if layout.frame_owner == NO_OFFSET {
        0
    } else {
        bytes[usize::from(layout.frame_owner) & (FRAME_READ_MAX - 1)]
    };
    python.code = code;
    python.previous = previous;
    python.instr = instr;
    python.owner = u32::from(owner);
    code != 0
}

/// The 8 bytes at `offset` of `bytes`, read in place.
#[inline(always)]
fn field_u64(bytes: &[u8; FRAME_READ_MAX], offset: u16) -> Option<u64> {
    let offset = usize::from(offset) & (FRAME_READ_MAX - 1);
    if offset + 8 > FRAME_READ_MAX {
        return None;
    }
    // SAFETY: `offset + 8` is within `bytes` (checked above); an unaligned
    // read of plain bytes.
    Some(unsafe { core::ptr::read_unaligned(bytes.as_ptr().add(offset).cast::<u64>()) })
}

/// The sampled thread's current frame, through its thread state, and
/// whether it holds the GIL.
#[inline(always)]
fn current_frame(process: &PythonProcess) -> Option<(u64, u32)> {
    let (layout, interpreters_head) = (&process.layout, process.interpreters_head);
    let fsbase = tls::fsbase()?;
    #[expect(clippy::cast_possible_truncation, reason = "the low half is the tid")]
    let tid = bpf_get_current_pid_tgid() as u32;
    let thread_id_at = |tstate: u64| tstate.wrapping_add(u64::from(layout.tstate_thread_id));
    let tstate = match maps::python_thread(tid) {
        Some(tstate) if read_user::<u64>(thread_id_at(tstate)) == Some(fsbase) => tstate,
        _ => {
            let tstate = find_thread(layout, interpreters_head, fsbase)?;
            maps::set_python_thread(tid, tstate);
            tstate
        }
    };
    let frame = read_user::<u64>(tstate.wrapping_add(u64::from(layout.tstate_frame)))?;
    let frame = if layout.cframe_frame == NO_OFFSET || frame == 0 {
        frame
    } else {
        read_user::<u64>(frame.wrapping_add(u64::from(layout.cframe_frame)))?
    };
    Some((frame, gil_of(process, tstate)))
}

/// Whether the thread whose state is `tstate` holds the GIL: it is
/// locked, and the thread is its last holder.
#[inline(always)]
fn gil_of(process: &PythonProcess, tstate: u64) -> u32 {
    let layout = &process.layout;
    let at = if layout.interp_gil == NO_OFFSET {
        Some(process.runtime_gil)
    } else {
        read_user::<u64>(process.interpreters_head)
            .and_then(|interp| read_user::<u64>(interp.wrapping_add(u64::from(layout.interp_gil))))
    };
    let Some(at) = at.filter(|&at| at != 0) else {
        return gil::UNKNOWN;
    };
    let locked = read_user::<u32>(at.wrapping_add(u64::from(layout.gil_locked)));
    let holder = read_user::<u64>(at.wrapping_add(u64::from(layout.gil_last_holder)));
    match (locked, holder) {
        (Some(locked), Some(holder)) if locked != 0 && holder == tstate => gil::HOLDS,
        (Some(_), Some(_)) => gil::RELEASED,
        _ => gil::UNKNOWN,
    }
}

/// The thread state whose `thread_id` is `fsbase`, in the main
/// interpreter's list.
#[inline(always)]
fn find_thread(layout: &KernelLayout, interpreters_head: u64, fsbase: u64) -> Option<u64> {
    let interp = read_user::<u64>(interpreters_head)?;
    let mut tstate = read_user::<u64>(interp.wrapping_add(u64::from(layout.interp_threads_head)))?;
    for _ in 0..THREAD_SCAN_MAX {
        if tstate == 0 {
            return None;
        }
        let thread_id = read_user::<u64>(tstate.wrapping_add(u64::from(layout.tstate_thread_id)))?;
        if thread_id == fsbase {
            return Some(tstate);
        }
        tstate = read_user::<u64>(tstate.wrapping_add(u64::from(layout.tstate_next)))?;
    }
    None
}

#[inline(always)]
fn read_user<T>(at: u64) -> Option<T> {
    // SAFETY: reads user memory through the fault-tolerant helper.
    unsafe { bpf_probe_read_user(at as *const T).ok() }
}

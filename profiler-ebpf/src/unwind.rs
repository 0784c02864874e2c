//! User stacks walked in the kernel from the daemon's unwind tables
//! (`profiler_common::unwind`), by frame pointer where a PC has no table.
//!
//! The walk runs in one `bpf_loop`, one step of a frame per iteration
//! (`unwind/frame.rs`): the frame's
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
    bpf_get_current_pid_tgid, bpf_probe_read_kernel,
    generated::{bpf_get_current_task_btf, bpf_loop, bpf_task_pt_regs},
};
use core::ffi::c_void;
use profiler_common::{
    process::ASK_LATER,
    python::gil,
    runtimes::Runtimes,
    stack::{NO_STACK, TRUNCATED},
    stats::Stat,
    unwind::{MAX_FRAMES, Regs, UnwindMapping},
};

use crate::{
    java,
    maps::{self, Scratch, Slot},
    process_seen, python, stack,
};

mod frame;

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
        state.phase = frame::phase::RECORD;
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
    i64::from(!frame::frame(state, trace, context))
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

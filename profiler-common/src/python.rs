//! Python frames in the kernel's stack walk: what the daemon publishes
//! per Python process, and how the walk records a Python frame in a
//! stack.
//!
//! When the native walk reaches a PC in the interpreter's eval loop
//! (`_PyEval_EvalFrameDefault`), it records that activation's Python
//! frames in the loop's place, from the thread's current frame back to
//! the activation's entry frame, then unwinds the loop natively. A Python
//! frame takes two stack entries: [`PYTHON_FRAME`] with the code object's
//! address, then the instruction offset and the code object's first line
//! (a fingerprint that tells a code object from another later allocated at
//! the same address). Names are read by the daemon (`profiler-userspace`'s
//! `runtimes/python/`), from the code object, once per code object.

/// Marks the first entry of a Python frame: user addresses (and so code
/// objects' addresses) stay below 2^47.
pub const PYTHON_FRAME: u64 = 1 << 63;

/// One entry: the walk's Python frames end here because the next frame
/// could not be read (the chain changed under the walk, or memory was
/// unreadable). Shown as `[truncated]` below the frames read.
pub const PYTHON_TORN: u64 = PYTHON_FRAME | 1;

/// The second entry of a Python frame: its instruction (see
/// [`KernelLayout::frame_instr`]) and its code object's first line.
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
#[must_use]
pub const fn frame_detail(instr: u32, first_line: u32) -> u64 {
    (first_line as u64) << 32 | instr as u64
}

/// A user stack entry as the daemon reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UserFrame {
    /// A native PC (leaf) or return address.
    Native(u64),
    /// A Python frame: its code object, its instruction as recorded (a
    /// byte offset from the code object's start for 3.11 and later, the
    /// frame's `f_lasti` before) and the code object's first line then.
    Python {
        code: u64,
        instr: u32,
        first_line: u32,
    },
    /// Python frames that could not be read on (see [`PYTHON_TORN`]).
    PythonTorn,
}

/// The frames of a recorded user stack, leaf first: a Python frame's two
/// entries become one frame (a lone first entry at the end is dropped).
pub fn user_frames(ips: &[u64]) -> impl Iterator<Item = UserFrame> + '_ {
    let mut i = 0;
    core::iter::from_fn(move || {
        let ip = *ips.get(i)?;
        i += 1;
        if ip == PYTHON_TORN {
            return Some(UserFrame::PythonTorn);
        }
        if ip & PYTHON_FRAME == 0 {
            return Some(UserFrame::Native(ip));
        }
        let detail = *ips.get(i)?;
        i += 1;
        #[expect(clippy::cast_possible_truncation, reason = "two u32 halves")]
        Some(UserFrame::Python {
            code: ip & !PYTHON_FRAME,
            instr: detail as u32,
            first_line: (detail >> 32) as u32,
        })
    })
}

/// How the interpreter chains its frames, which tells the walk where one
/// eval loop activation's frames end.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameChain {
    /// 3.8 to 3.10: one frame object per activation (`f_back` chains them;
    /// `f_lasti`, an `int`, is the instruction).
    OnePerCall = 1,
    /// 3.11: interpreter frames; the activation's first frame has
    /// `is_entry` set; `prev_instr` points at the instruction.
    EntryFlag = 2,
    /// 3.12 and later: each activation starts with a shim frame owned by
    /// the C stack (`owner` is [`FRAME_OWNED_BY_CSTACK`]); the
    /// instruction pointer points at the instruction.
    OwnerShim = 3,
}

impl FrameChain {
    /// Decodes [`KernelLayout::chain`]; `None` for no Python (0) or a
    /// value this build does not know.
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    #[must_use]
    pub const fn from_raw(raw: u8) -> Option<Self> {
        match raw {
            1 => Some(Self::OnePerCall),
            2 => Some(Self::EntryFlag),
            3 => Some(Self::OwnerShim),
            _ => None,
        }
    }
}

/// Whether a sampled Python thread held the GIL
/// ([`crate::sample::SampleKey::python_gil`]).
pub mod gil {
    /// Not a Python thread, or the GIL could not be read.
    pub const UNKNOWN: u32 = 0;
    /// The GIL is locked, and this thread is its last holder.
    pub const HOLDS: u32 = 1;
    /// This thread does not hold the GIL: it runs C code that released
    /// it, waits for it, or sleeps or blocks with it released.
    pub const RELEASED: u32 = 2;
}

/// `_PyInterpreterFrame.owner` of an activation's shim frame (3.12+).
pub const FRAME_OWNED_BY_CSTACK: u8 = 3;

/// Bytes of a frame the walk reads at once (every field it needs lies in
/// them; [`KernelLayout::frame_read`] is at most this).
pub const FRAME_READ_MAX: usize = 128;

/// Thread states the walk passes looking for the sampled thread's before
/// it gives up (counted): a process with more Python threads than this
/// loses Python frames on the others' until their states are cached.
pub const THREAD_SCAN_MAX: u32 = 128;

/// The byte offsets the walk reads, of one interpreter version.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelLayout {
    /// `PyInterpreterState`'s first thread state (`tstate_head`, later
    /// `threads.head`).
    pub interp_threads_head: u16,
    /// `PyThreadState.next`.
    pub tstate_next: u16,
    /// `PyThreadState.thread_id`: the thread's `pthread_self()`, which is
    /// its thread pointer (`fsbase`) in glibc and musl.
    pub tstate_thread_id: u16,
    /// `PyThreadState`'s current frame: `frame` (3.8 to 3.10), `cframe`
    /// (3.11, 3.12: a pointer to a `_PyCFrame`), `current_frame` (3.13).
    pub tstate_frame: u16,
    /// `_PyCFrame.current_frame`, or [`NO_OFFSET`] where `tstate_frame`
    /// holds the frame itself.
    pub cframe_frame: u16,
    /// The frame's caller: `f_back`, later `previous`.
    pub frame_previous: u16,
    /// The frame's code object: `f_code`, later `f_executable`.
    pub frame_code: u16,
    /// The frame's instruction: `f_lasti` (an `int`), or a pointer into the
    /// code object (`prev_instr`, `instr_ptr`), recorded less the code
    /// object's address.
    pub frame_instr: u16,
    /// `is_entry` (3.11) or `owner` (3.12+): one byte.
    pub frame_owner: u16,
    /// `PyCodeObject.co_firstlineno` (an `int`).
    pub code_first_line: u16,
    /// Bytes of a frame to read (past its last field read).
    pub frame_read: u16,
    /// `PyInterpreterState.ceval.gil`, a pointer to the GIL (3.12+), or
    /// [`NO_OFFSET`] where the GIL is in `_PyRuntime`
    /// ([`PythonProcess::runtime_gil`]).
    pub interp_gil: u16,
    /// The GIL's `last_holder` (a thread state) and `locked` (an `int`).
    pub gil_last_holder: u16,
    pub gil_locked: u16,
    /// A [`FrameChain`] as `u8`.
    pub chain: u8,
    pub pad: [u8; 3],
}

/// An offset not used by a layout.
pub const NO_OFFSET: u16 = u16::MAX;

/// What the walk needs of one Python process (`PYTHON_PROCS`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PythonProcess {
    /// The eval loop's code, `[eval_start, eval_end)`.
    pub eval_start: u64,
    pub eval_end: u64,
    /// Address of `_PyRuntime.interpreters.head`: the main interpreter.
    pub interpreters_head: u64,
    /// Address of `_PyRuntime.ceval.gil` (3.8 to 3.11; 0 after).
    pub runtime_gil: u64,
    pub layout: KernelLayout,
}

/// Where the walk is in a Python process's frames ([`PythonWalk::phase`]).
pub mod phase {
    /// The thread's current frame is not looked up yet.
    pub const UNSEEN: u32 = 0;
    /// Between activations: `cursor` is the next frame to record.
    pub const BETWEEN: u32 = 1;
    /// Recording an activation's frames.
    pub const IN_ACTIVATION: u32 = 2;
    /// The activation's last frame is recorded.
    pub const ENDING: u32 = 3;
    /// No Python frames on this walk: not a Python process, its thread
    /// state was not found, or a frame could not be read.
    pub const OFF: u32 = 4;
}

/// The Python part of the kernel walk's state ([`crate::unwind::WalkState`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PythonWalk {
    /// The process's entry of `PYTHON_PROCS` (`eval_end` 0: none).
    pub process: PythonProcess,
    /// The next Python frame to record (0: the chain's end).
    pub cursor: u64,
    /// A [`phase`] constant.
    pub phase: u32,
    /// Frames recorded of the current activation.
    pub recorded: u32,
    /// A [`gil`] constant: the thread's, once its state is found.
    pub gil: u32,
    /// The frame being recorded: its code object, caller, instruction and
    /// owner byte. Here rather than on the BPF stack, which the 6.1
    /// verifier bounds to 512 bytes over the whole call chain.
    pub owner: u32,
    pub code: u64,
    pub previous: u64,
    pub instr: u32,
    pub pad: u32,
    /// The code object recorded, as the key of `PYTHON_CODES` (map memory
    /// too, for the same reason).
    pub seen: CodeSeen,
}

/// A code object the walk recorded for the first time (`PYTHON_CODES`'s
/// key and `PYTHON_CODE_REQUESTS`'): the daemon reads its names while the
/// process most likely still runs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CodeSeen {
    pub pid: u32,
    pub first_line: u32,
    pub code: u64,
}

#[cfg(feature = "user")]
mod pod {
    use super::{CodeSeen, PythonProcess};

    // SAFETY: repr(C): four u64 then fourteen u16 and four u8 (32 bytes),
    // no padding; every bit pattern is valid.
    unsafe impl aya::Pod for PythonProcess {}
    // SAFETY: repr(C): two u32 and a u64, no padding; every bit pattern is
    // valid.
    unsafe impl aya::Pod for CodeSeen {}
}

const _: () = assert!(size_of::<KernelLayout>() == 32);
const _: () = assert!(size_of::<PythonProcess>() == 64);
const _: () = assert!(size_of::<CodeSeen>() == 16);
const _: () = assert!(size_of::<PythonWalk>() == 128);

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn python_frames_take_two_entries_and_native_ones_one() {
        let code = 0x7f00_1234_5670;
        let ips = [
            0x40_1000,
            PYTHON_FRAME | code,
            frame_detail(44, 12),
            0x40_2000,
            PYTHON_TORN,
        ];
        let frames: Vec<_> = user_frames(&ips).collect();
        assert_eq!(
            frames,
            [
                UserFrame::Native(0x40_1000),
                UserFrame::Python {
                    code,
                    instr: 44,
                    first_line: 12
                },
                UserFrame::Native(0x40_2000),
                UserFrame::PythonTorn,
            ]
        );
    }

    #[test]
    fn a_python_frame_cut_after_its_first_entry_is_dropped() {
        let ips = [0x40_1000, PYTHON_FRAME | 0x7f00_0000_0010];
        let frames: Vec<_> = user_frames(&ips).collect();
        assert_eq!(frames, [UserFrame::Native(0x40_1000)]);
    }
}

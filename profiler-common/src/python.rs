//! Python frames in the kernel's stack walk: what the daemon publishes
//! per Python process, and how the walk records a Python frame in a
//! stack.
//!
//! When the native walk reaches a PC in the interpreter's eval loop
//! (`_PyEval_EvalFrameDefault`), it records that activation's Python
//! frames in the loop's place, from the thread's current frame back to
//! the activation's entry frame, then unwinds the loop natively. A Python
//! frame takes two stack entries (`crate::frames`): a tagged entry with the code object's
//! address, then the instruction offset and the code object's first line
//! (a fingerprint that tells a code object from another later allocated at
//! the same address). Names are read by the daemon (`profiler-userspace`'s
//! `runtimes/python/`), from the code object, once per code object.

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

//! Java (HotSpot) frames in the kernel's stack walk: what the daemon
//! publishes per JVM, and the walk's state.
//!
//! A PC in the JVM's code cache belongs to a code blob, found as the JVM
//! finds it: the code heap's segment map leads from the PC's segment back
//! to the blob's first. The blob's name tells its kind: a compiled method
//! (`nmethod`) is recorded and unwound by its frame size; the template
//! interpreter's frames by its frame pointer, recording the `Method*` the
//! frame holds; other blobs (stubs, adapters) are native frames unwound by
//! their frame size or frame pointer. Frames are recorded as two stack
//! entries (`crate::frames`); names are read by the daemon
//! (`profiler-userspace`'s `runtimes/java/`).

/// The most code heaps a JVM has (non-methods, profiled, non-profiled:
/// `-XX:+SegmentedCodeCache`, the default; one without it).
pub const CODE_HEAPS_MAX: usize = 3;

/// Steps back through a segment map before giving up: each step goes up
/// to 254 segments back, so 16 cover a blob of 4064 segments (508 KiB at
/// the default 128-byte segment).
pub const SEGMAP_STEPS: u32 = 16;

/// A segment map byte that marks a free segment.
pub const SEGMAP_FREE: u8 = 0xff;

/// The first four bytes of a blob's name (`CodeBlob::_name`), read as a
/// little-endian `u32`, for the kinds the walk tells apart.
pub mod blob_kind {
    /// `"nmethod"`: a compiled Java method.
    pub const NMETHOD: u32 = u32::from_le_bytes(*b"nmet");
    /// `"native nmethod"`: a native method's wrapper, a compiled method too.
    pub const NATIVE_NMETHOD: u32 = u32::from_le_bytes(*b"nati");
    /// `"Interpreter"`: the template interpreter.
    pub const INTERPRETER: u32 = u32::from_le_bytes(*b"Inte");
    /// `"vtable chunks"`, `"itable chunks"`: dispatch stubs that push
    /// nothing but the return address.
    pub const VTABLE: u32 = u32::from_le_bytes(*b"vtab");
    pub const ITABLE: u32 = u32::from_le_bytes(*b"itab");
}

/// Interpreter frame slots, in words from its frame pointer (x86-64,
/// JDK 9 and later: `frame_x86.hpp`).
pub mod interpreter_frame {
    /// The caller's SP as it called (`interpreter_frame_sender_sp_offset`).
    pub const SENDER_SP: i64 = -1;
    /// The `Method*` (`interpreter_frame_method_offset`).
    pub const METHOD: i64 = -3;
    /// The bytecode pointer, saved at calls (`interpreter_frame_bcp_offset`).
    pub const BCP: i64 = -8;
}

/// One code heap: its blobs' memory `[low, high)` and its segment map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodeHeap {
    pub low: u64,
    pub high: u64,
    pub segmap: u64,
}

/// The byte offsets the walk reads, from the JVM's own `gHotSpotVMStructs`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JavaLayout {
    /// `CodeBlob::_name` (a `const char*`).
    pub blob_name: u16,
    /// `CodeBlob::_frame_size` (an `int`, in words).
    pub blob_frame_size: u16,
    /// `CodeBlob::_frame_complete_offset` (from the code's start: an
    /// `int`, from JDK 25 an `int16_t`: see `blob_frame_complete_16`).
    pub blob_frame_complete: u16,
    /// `CodeBlob::_code_begin` (an address), or from JDK 23
    /// `CodeBlob::_code_offset` (an `int` from the blob's start: see
    /// `blob_code_is_offset`).
    pub blob_code_begin: u16,
    /// `nmethod::_compile_id` (an `int`).
    pub nmethod_compile_id: u16,
    /// `Method::_constMethod`.
    pub method_const_method: u16,
    /// `sizeof(ConstMethod)`: the bytecodes follow it.
    pub const_method_size: u16,
    /// `sizeof(HeapBlock)`: a blob follows its block's header.
    pub heap_block_size: u16,
    /// `CodeHeap::_log2_segment_size`.
    pub segment_shift: u8,
    /// Code heaps in use (at most [`CODE_HEAPS_MAX`]).
    pub heaps: u8,
    /// Non-zero: `blob_code_begin` is an offset field, not an address.
    pub blob_code_is_offset: u8,
    /// Non-zero: `blob_frame_complete` is 16 bits wide.
    pub blob_frame_complete_16: u8,
    pub pad: [u8; 4],
}

/// What the walk needs of one JVM (`JAVA_PROCS`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JavaProcess {
    /// The code cache's bounds, `[code_lo, code_hi)` (0, 0: none).
    pub code_lo: u64,
    pub code_hi: u64,
    pub heaps: [CodeHeap; CODE_HEAPS_MAX],
    pub layout: JavaLayout,
}

/// The Java part of the kernel walk's state ([`crate::unwind::WalkState`]):
/// the process's entry, the blob being looked at and every word the step
/// reads, in map memory rather than on the BPF stack (which the 6.1
/// verifier bounds to 512 bytes over the whole call chain: the step's
/// reads go straight here).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JavaWalk {
    /// The process's entry of `JAVA_PROCS` (`code_hi` 0: none).
    pub process: JavaProcess,
    /// The heap holding the current PC: its blobs' start and segment map.
    pub heap_low: u64,
    pub segmap: u64,
    /// The segment under the segment map search.
    pub segment: u64,
    /// The blob holding the current PC, and what the walk read of it.
    pub blob: u64,
    pub name: u64,
    pub code_begin: u64,
    /// The caller's PC, SP and frame pointer as read, or an interpreter
    /// frame's method, bytecode pointer and `ConstMethod*`.
    pub words: [u64; 3],
    pub kind: u32,
    pub frame_size: u32,
    pub frame_complete: u32,
    pub compile_id: u32,
    /// Frames recorded (counted at the walk's end).
    pub frames: u32,
    /// The segment map byte read last.
    pub tag: u8,
    pub pad: [u8; 3],
    /// The frame recorded, as the key of `JAVA_FRAMES` (map memory too).
    pub seen: FrameSeen,
}

/// A Java frame the walk recorded for the first time (`JAVA_FRAMES`'s key
/// and `JAVA_FRAME_REQUESTS`'): its process and its two stack entries.
/// The daemon names it at once, while the JVM most likely runs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FrameSeen {
    pub pid: u32,
    pub pad: u32,
    pub entry: u64,
    pub detail: u64,
}

#[cfg(feature = "user")]
mod pod {
    use super::{FrameSeen, JavaProcess};

    // SAFETY: repr(C): eleven u64, eight u16 and eight u8 (the layout's 24 bytes), no padding;
    // every bit pattern is valid.
    unsafe impl aya::Pod for JavaProcess {}
    // SAFETY: repr(C): two u32 and two u64, no padding; every bit pattern
    // is valid.
    unsafe impl aya::Pod for FrameSeen {}
}

const _: () = assert!(size_of::<JavaLayout>() == 24);
const _: () = assert!(size_of::<JavaProcess>() == 112);
const _: () = assert!(size_of::<JavaWalk>() == 232);
const _: () = assert!(size_of::<FrameSeen>() == 24);

//! CPython 3.13's description of itself: `_Py_DebugOffsets`, the first
//! member of `_PyRuntime` (which starts the `.PyRuntime` section), as
//! `Include/internal/pycore_debug_offsets.h` lays it out.
use profiler_common::python::{FRAME_READ_MAX, FrameChain, KernelLayout, NO_OFFSET};

use super::layout::{CodeLayout, Layout, LineTable, frame_read};

/// The structure's first bytes.
const COOKIE: &[u8; 8] = b"xdebugpy";

/// Offsets of the fields read, in `_Py_DebugOffsets` of 3.13 (each an
/// 8-byte offset; a struct's first member is its size).
mod at {
    pub const VERSION: usize = 8;
    pub const FREE_THREADED: usize = 16;
    pub const INTERPRETERS_HEAD: usize = 40;
    pub const THREADS_HEAD: usize = 72;
    pub const CEVAL_GIL: usize = 112;
    pub const GIL_RUNTIME_STATE: usize = 120;
    pub const GIL_LOCKED: usize = 136;
    pub const GIL_HOLDER: usize = 144;
    pub const TSTATE_NEXT: usize = 168;
    pub const TSTATE_CURRENT_FRAME: usize = 184;
    pub const TSTATE_THREAD_ID: usize = 192;
    pub const FRAME_PREVIOUS: usize = 232;
    pub const FRAME_EXECUTABLE: usize = 240;
    pub const FRAME_INSTR_PTR: usize = 248;
    pub const FRAME_OWNER: usize = 264;
    pub const CODE_FILENAME: usize = 280;
    pub const CODE_NAME: usize = 288;
    pub const CODE_QUALNAME: usize = 296;
    pub const CODE_LINETABLE: usize = 304;
    pub const CODE_FIRSTLINENO: usize = 312;
    pub const CODE_ADAPTIVE: usize = 344;
    pub const ASCII_SIZE: usize = 560;
    /// The structure's size in 3.13.
    pub const END: usize = 584;
}

/// Why a `_Py_DebugOffsets` is not used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DebugOffsetsError {
    #[error("no _Py_DebugOffsets cookie at the start of _PyRuntime")]
    NoCookie,
    #[error("a free-threaded build (its frames are not read)")]
    FreeThreaded,
    #[error("an offset does not fit the walk's reads")]
    OutOfRange,
}

/// The interpreter's `PY_VERSION_HEX` as its debug offsets give it.
#[must_use]
pub fn version_hex(runtime: &[u8]) -> Option<u64> {
    (runtime.get(..8)? == COOKIE).then(|| word(runtime, at::VERSION))?
}

/// The layout a 3.13 interpreter describes at the start of `runtime`
/// (the `.PyRuntime` section's bytes).
///
/// # Errors
/// When the bytes are not a 3.13 `_Py_DebugOffsets` the walk can use.
pub fn layout(runtime: &[u8]) -> Result<Layout, DebugOffsetsError> {
    if runtime.len() < at::END || &runtime[..8] != COOKIE {
        return Err(DebugOffsetsError::NoCookie);
    }
    if word(runtime, at::FREE_THREADED) != Some(0) {
        return Err(DebugOffsetsError::FreeThreaded);
    }
    let get = |offset| word(runtime, offset).ok_or(DebugOffsetsError::NoCookie);
    let small = |offset| {
        u16::try_from(get(offset)?)
            .ok()
            .filter(|&v| v != NO_OFFSET)
            .ok_or(DebugOffsetsError::OutOfRange)
    };
    let gil_field = |offset| {
        get(offset)?
            .checked_sub(get(at::GIL_RUNTIME_STATE)?)
            .and_then(|o| u16::try_from(o).ok())
            .ok_or(DebugOffsetsError::OutOfRange)
    };
    let (previous, executable, instr, owner) = (
        small(at::FRAME_PREVIOUS)?,
        small(at::FRAME_EXECUTABLE)?,
        small(at::FRAME_INSTR_PTR)?,
        small(at::FRAME_OWNER)?,
    );
    let ascii_size = get(at::ASCII_SIZE)?;
    let mut kernel = KernelLayout {
        interp_threads_head: small(at::THREADS_HEAD)?,
        tstate_next: small(at::TSTATE_NEXT)?,
        tstate_thread_id: small(at::TSTATE_THREAD_ID)?,
        tstate_frame: small(at::TSTATE_CURRENT_FRAME)?,
        cframe_frame: NO_OFFSET,
        frame_previous: previous,
        frame_code: executable,
        frame_instr: instr,
        frame_owner: owner,
        code_first_line: small(at::CODE_FIRSTLINENO)?,
        frame_read: 0,
        interp_gil: small(at::CEVAL_GIL)?,
        // The interpreter's own GIL's fields, less where it starts: the
        // same structure `ceval.gil` points to.
        gil_last_holder: gil_field(at::GIL_HOLDER)?,
        gil_locked: gil_field(at::GIL_LOCKED)?,
        chain: FrameChain::OwnerShim as u8,
        pad: [0; 3],
    };
    kernel.frame_read = frame_read(&kernel);
    if usize::from(kernel.frame_read) > FRAME_READ_MAX {
        return Err(DebugOffsetsError::OutOfRange);
    }
    Ok(Layout {
        kernel,
        interpreters_head: get(at::INTERPRETERS_HEAD)?,
        runtime_gil: None,
        code: CodeLayout {
            filename: get(at::CODE_FILENAME)?,
            name: get(at::CODE_NAME)?,
            qualname: Some(get(at::CODE_QUALNAME)?),
            line_table: get(at::CODE_LINETABLE)?,
            first_line: get(at::CODE_FIRSTLINENO)?,
            instructions: Some(get(at::CODE_ADAPTIVE)?),
        },
        lines: LineTable::Locations,
        ascii_size,
        // A compact string's `utf8_length` and `utf8` follow its ASCII
        // header.
        compact_size: ascii_size + 16,
    })
}

fn word(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

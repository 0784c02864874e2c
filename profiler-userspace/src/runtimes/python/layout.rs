//! Where CPython keeps what the walk and the daemon read, per version:
//! a table for 3.8 to 3.12 (checked against each build's DWARF by the
//! `python_layouts` test), and from 3.13 the interpreter's own
//! description of itself (`debug_offsets.rs`).
use profiler_common::python::{FrameChain, KernelLayout, NO_OFFSET};

/// A CPython version, `major.minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u8,
    pub minor: u8,
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// How a code object maps an instruction to a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineTable {
    /// `co_lnotab` (3.8, 3.9): byte offsets; the instruction recorded is
    /// `f_lasti`, a byte offset.
    Lnotab,
    /// `co_linetable` of 3.10: byte offsets; `f_lasti` counts code units.
    Lines310,
    /// The location table of 3.11 and later: code units; the instruction
    /// recorded is a byte offset from the code object's start, less
    /// `co_code_adaptive`.
    Locations,
}

/// The code object's fields the daemon reads (byte offsets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeLayout {
    pub filename: u64,
    pub name: u64,
    /// `co_qualname` (3.11+).
    pub qualname: Option<u64>,
    /// `co_lnotab` or `co_linetable`.
    pub line_table: u64,
    pub first_line: u64,
    /// `co_code_adaptive` (3.11+): where the instructions start.
    pub instructions: Option<u64>,
}

/// Everything read of one CPython version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// What the kernel walk reads.
    pub kernel: KernelLayout,
    /// `_PyRuntime.interpreters.head`, from `_PyRuntime`.
    pub interpreters_head: u64,
    /// `_PyRuntime.ceval.gil`, from `_PyRuntime` (3.8 to 3.11; the GIL is
    /// the interpreter's from 3.12: [`KernelLayout::interp_gil`]).
    pub runtime_gil: Option<u64>,
    pub code: CodeLayout,
    pub lines: LineTable,
    /// `sizeof(PyASCIIObject)`: a compact ASCII string's characters follow.
    pub ascii_size: u64,
    /// `sizeof(PyCompactUnicodeObject)`: other compact strings'.
    pub compact_size: u64,
}

/// Offsets of `PyObject`, `PyUnicodeObject` and `PyBytesObject` common to
/// every version here.
pub const OB_TYPE: u64 = 8;
pub const VAR_SIZE: u64 = 16;
pub const UNICODE_STATE: u64 = 32;
pub const BYTES_DATA: u64 = 32;

/// Bytes of a frame the walk reads: past the last field it reads (the
/// instruction as 8 bytes even where it is an `int`, the owner as one).
#[must_use]
pub fn frame_read(kernel: &KernelLayout) -> u16 {
    let owner = if kernel.frame_owner == NO_OFFSET {
        0
    } else {
        kernel.frame_owner + 1
    };
    [kernel.frame_previous, kernel.frame_code, kernel.frame_instr]
        .into_iter()
        .map(|o| o.saturating_add(8))
        .chain([owner])
        .max()
        .unwrap_or(0)
}

/// The layout of CPython `version`, when it is one of the table's
/// (3.8 to 3.12; 3.13 and later describe themselves).
#[must_use]
pub fn known(version: Version) -> Option<Layout> {
    let mut layout = table(version)?;
    layout.kernel.frame_read = frame_read(&layout.kernel);
    Some(layout)
}

/// The table's entry for `version` (its `frame_read` left to
/// [`frame_read`]).
fn table(version: Version) -> Option<Layout> {
    if version.major != 3 {
        return None;
    }
    Some(match version.minor {
        8 => one_per_call(104, 1152, LineTable::Lnotab),
        9 => one_per_call(104, 352, LineTable::Lnotab),
        10 => one_per_call(96, 352, LineTable::Lines310),
        11 => Layout {
            kernel: KernelLayout {
                interp_threads_head: 16,
                tstate_next: 8,
                tstate_thread_id: 152,
                tstate_frame: 56,
                cframe_frame: 8,
                frame_previous: 48,
                frame_code: 32,
                frame_instr: 56,
                frame_owner: 68,
                code_first_line: 72,
                frame_read: 0,
                interp_gil: NO_OFFSET,
                gil_last_holder: 8,
                gil_locked: 16,
                chain: FrameChain::EntryFlag as u8,
                pad: [0; 3],
            },
            interpreters_head: 40,
            runtime_gil: Some(360),
            code: CodeLayout {
                filename: 112,
                name: 120,
                qualname: Some(128),
                line_table: 136,
                first_line: 72,
                instructions: Some(184),
            },
            lines: LineTable::Locations,
            ascii_size: 48,
            compact_size: 72,
        },
        12 => Layout {
            kernel: KernelLayout {
                interp_threads_head: 72,
                tstate_next: 8,
                tstate_thread_id: 136,
                tstate_frame: 56,
                cframe_frame: 0,
                frame_previous: 8,
                frame_code: 0,
                frame_instr: 56,
                frame_owner: 70,
                code_first_line: 68,
                frame_read: 0,
                interp_gil: 384,
                gil_last_holder: 8,
                gil_locked: 16,
                chain: FrameChain::OwnerShim as u8,
                pad: [0; 3],
            },
            interpreters_head: 40,
            runtime_gil: None,
            code: CodeLayout {
                filename: 112,
                name: 120,
                qualname: Some(128),
                line_table: 136,
                first_line: 68,
                instructions: Some(192),
            },
            lines: LineTable::Locations,
            ascii_size: 40,
            compact_size: 56,
        },
        _ => return None,
    })
}

/// 3.8 to 3.10: frame objects, `f_lasti` at `lasti`, the GIL at `gil` in
/// `_PyRuntime`.
fn one_per_call(lasti: u16, gil: u64, lines: LineTable) -> Layout {
    Layout {
        kernel: KernelLayout {
            interp_threads_head: 8,
            tstate_next: 8,
            tstate_thread_id: 176,
            tstate_frame: 24,
            cframe_frame: NO_OFFSET,
            frame_previous: 24,
            frame_code: 32,
            frame_instr: lasti,
            frame_owner: NO_OFFSET,
            code_first_line: 40,
            frame_read: 0,
            interp_gil: NO_OFFSET,
            gil_last_holder: 8,
            gil_locked: 16,
            chain: FrameChain::OnePerCall as u8,
            pad: [0; 3],
        },
        interpreters_head: 32,
        runtime_gil: Some(gil),
        code: CodeLayout {
            filename: 104,
            name: 112,
            qualname: None,
            line_table: 120,
            first_line: 40,
            instructions: None,
        },
        lines,
        ascii_size: 48,
        compact_size: 72,
    }
}

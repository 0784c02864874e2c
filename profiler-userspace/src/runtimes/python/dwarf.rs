//! The layout of a CPython build from its own DWARF (pyenv's builds have
//! it): what `tests/python.rs` checks the table of `layout.rs` and 3.13's
//! own description against.
use std::collections::HashMap;

use profiler_common::python::{FrameChain, KernelLayout, NO_OFFSET};

use super::layout::{CodeLayout, Layout, LineTable, Version, frame_read};
use crate::runtimes::dwarf::{Structure, structures};

/// The structures read.
const STRUCTURES: [&str; 14] = [
    "pyruntimestate",
    "pyinterpreters",
    "_is",
    "pythreads",
    "_ts",
    "_PyCFrame",
    "_frame",
    "_PyInterpreterFrame",
    "PyCodeObject",
    "PyASCIIObject",
    "PyCompactUnicodeObject",
    "_ceval_runtime_state",
    "_ceval_state",
    "_gil_runtime_state",
];

/// The structures found, by name.
type Found = HashMap<String, Structure>;

/// The layout of CPython `version` as `file`'s DWARF describes it; `None`
/// when it has no DWARF or lacks a field.
///
/// # Errors
/// When the DWARF is malformed.
pub fn layout(file: &object::File<'_>, version: Version) -> Result<Option<Layout>, gimli::Error> {
    let found = structures(file, &STRUCTURES)?;
    let minor = version.minor;
    Ok((|| {
        let field = |s: &str, m: &str| found.get(s).and_then(|f| f.member(m));
        let size = |s: &str| found.get(s).map(|f| f.size);
        Some(Layout {
            kernel: kernel_layout(&found, minor)?,
            interpreters_head: field("pyruntimestate", "interpreters")?
                + field("pyinterpreters", "head")?,
            runtime_gil: if minor <= 11 {
                Some(field("pyruntimestate", "ceval")? + field("_ceval_runtime_state", "gil")?)
            } else {
                None
            },
            code: code_layout(&found, minor)?,
            lines: match minor {
                8 | 9 => LineTable::Lnotab,
                10 => LineTable::Lines310,
                _ => LineTable::Locations,
            },
            ascii_size: size("PyASCIIObject")?,
            compact_size: size("PyCompactUnicodeObject")?,
        })
    })())
}

/// Member `m` of structure `s`, as the walk's 16-bit offset.
fn small(found: &Found, s: &str, m: &str) -> Option<u16> {
    found
        .get(s)
        .and_then(|f| f.member(m))
        .and_then(|o| u16::try_from(o).ok())
}

/// What the kernel walk reads, in 3.`minor`.
fn kernel_layout(found: &Found, minor: u8) -> Option<KernelLayout> {
    let small = |s: &str, m: &str| small(found, s, m);
    let (frame, code, instr, owner, chain) = match minor {
        8..=10 => ("_frame", "f_code", "f_lasti", None, FrameChain::OnePerCall),
        11 => (
            "_PyInterpreterFrame",
            "f_code",
            "prev_instr",
            Some("is_entry"),
            FrameChain::EntryFlag,
        ),
        12 => (
            "_PyInterpreterFrame",
            "f_code",
            "prev_instr",
            Some("owner"),
            FrameChain::OwnerShim,
        ),
        _ => (
            "_PyInterpreterFrame",
            "f_executable",
            "instr_ptr",
            Some("owner"),
            FrameChain::OwnerShim,
        ),
    };
    let previous = if minor <= 10 { "f_back" } else { "previous" };
    let threads_head = if minor <= 10 {
        small("_is", "tstate_head")?
    } else {
        small("_is", "threads")? + small("pythreads", "head")?
    };
    let (tstate_frame, cframe_frame) = match minor {
        8..=10 => (small("_ts", "frame")?, NO_OFFSET),
        11 | 12 => (
            small("_ts", "cframe")?,
            small("_PyCFrame", "current_frame")?,
        ),
        _ => (small("_ts", "current_frame")?, NO_OFFSET),
    };
    let mut kernel = KernelLayout {
        interp_threads_head: threads_head,
        tstate_next: small("_ts", "next")?,
        tstate_thread_id: small("_ts", "thread_id")?,
        tstate_frame,
        cframe_frame,
        frame_previous: small(frame, previous)?,
        frame_code: small(frame, code)?,
        frame_instr: small(frame, instr)?,
        frame_owner: owner.map_or(Some(NO_OFFSET), |o| small(frame, o))?,
        code_first_line: small("PyCodeObject", "co_firstlineno")?,
        frame_read: 0,
        interp_gil: if minor <= 11 {
            NO_OFFSET
        } else {
            small("_is", "ceval")? + small("_ceval_state", "gil")?
        },
        gil_last_holder: small("_gil_runtime_state", "last_holder")?,
        gil_locked: small("_gil_runtime_state", "locked")?,
        chain: chain as u8,
        pad: [0; 3],
    };
    kernel.frame_read = frame_read(&kernel);
    Some(kernel)
}

/// The code object's fields the daemon reads, in 3.`minor`.
fn code_layout(found: &Found, minor: u8) -> Option<CodeLayout> {
    let field = |m: &str| found.get("PyCodeObject").and_then(|f| f.member(m));
    let modern = minor >= 11;
    Some(CodeLayout {
        filename: field("co_filename")?,
        name: field("co_name")?,
        qualname: if modern {
            Some(field("co_qualname")?)
        } else {
            None
        },
        line_table: field(if minor <= 9 {
            "co_lnotab"
        } else {
            "co_linetable"
        })?,
        first_line: field("co_firstlineno")?,
        instructions: if modern {
            Some(field("co_code_adaptive")?)
        } else {
            None
        },
    })
}

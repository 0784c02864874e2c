//! A code object's names, read from the process that runs it: its
//! (qualified) name, file name, first line and line table, read once per
//! code object when the walk first records it.
use std::{io, sync::Arc};

use super::{
    binary::Interpreter,
    layout::{BYTES_DATA, LineTable, OB_TYPE, UNICODE_STATE, VAR_SIZE},
    lines::line_of,
};
use crate::process::memory::{Memory, u64_at};

/// Longest name read (characters); longer ones are cut.
const MAX_NAME_CHARS: u64 = 1024;
/// Longest line table read (bytes); a longer one gives lines past it
/// as the function's first.
const MAX_LINE_TABLE: u64 = 1 << 16;

/// Why a code object was not read.
#[derive(Debug, thiserror::Error)]
pub enum CodeError {
    #[error("reading the process's memory")]
    Memory(#[from] io::Error),
    /// Freed (and maybe reused by another object) since it was recorded.
    #[error("not a code object any more")]
    NotCode,
    /// Another code object took the address since it was recorded.
    #[error("another code object at the same address")]
    Reused,
    #[error("a name or table that does not fit its object")]
    Malformed,
}

/// What was read of one code object.
#[derive(Debug, PartialEq, Eq)]
pub struct CodeInfo {
    /// Qualified name from 3.11, name before.
    pub name: String,
    pub file: String,
    pub first_line: u32,
    line_table: Vec<u8>,
    lines: LineTable,
    /// Where its instructions start in the object (3.11+).
    instructions: Option<u64>,
}

impl CodeInfo {
    /// The line of the instruction the walk recorded (the first line
    /// where the table gives none).
    #[must_use]
    pub fn line(&self, instr: u32) -> u32 {
        let unit = match self.instructions {
            Some(start) => u64::from(instr).checked_sub(start).map(|b| b / 2),
            None => Some(u64::from(instr)),
        };
        unit.and_then(|u| line_of(self.lines, &self.line_table, self.first_line, u))
            .unwrap_or(self.first_line)
    }
}

/// A code object of a process, as the walk recorded it and as read.
#[derive(Debug)]
pub struct PythonCode {
    pub pid: u32,
    pub code: u64,
    pub first_line: u32,
    pub info: Arc<CodeInfo>,
}

/// Reads the code object at `code` in `memory`, run by `interpreter`
/// loaded with `bias`; `first_line` is the first line the walk read.
///
/// # Errors
/// When it cannot be read or is no longer the code object recorded.
pub fn read(
    memory: Memory,
    interpreter: &Interpreter,
    bias: u64,
    code: u64,
    first_line: u32,
) -> Result<CodeInfo, CodeError> {
    let layout = &interpreter.layout;
    let fields = &layout.code;
    let end = [
        fields.filename,
        fields.name,
        fields.qualname.unwrap_or(0),
        fields.line_table,
        fields.first_line,
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
        + 8;
    let mut header = vec![0u8; usize::try_from(end).map_err(|_| CodeError::Malformed)?];
    memory.read(code, &mut header)?;
    if u64_at(&header, OB_TYPE) != Some(interpreter.code_type.wrapping_add(bias)) {
        return Err(CodeError::NotCode);
    }
    #[expect(clippy::cast_possible_truncation, reason = "an int's 4 bytes")]
    let read_first_line = u64_at(&header, fields.first_line).map(|w| w as u32);
    if read_first_line != Some(first_line) {
        return Err(CodeError::Reused);
    }
    let pointer = |at| u64_at(&header, at).ok_or(CodeError::Malformed);
    let name = string(
        memory,
        layout,
        pointer(fields.qualname.unwrap_or(fields.name))?,
    )?;
    let file = string(memory, layout, pointer(fields.filename)?)?;
    let line_table = bytes(memory, pointer(fields.line_table)?)?;
    Ok(CodeInfo {
        name,
        file,
        first_line,
        line_table,
        lines: layout.lines,
        instructions: fields.instructions,
    })
}

/// The `str` object at `at`: compact strings only (every name and file
/// name of a code object is one).
fn string(memory: Memory, layout: &super::layout::Layout, at: u64) -> Result<String, CodeError> {
    let mut head = [0u8; 40];
    memory.read(at, &mut head)?;
    let length = u64_at(&head, VAR_SIZE).ok_or(CodeError::Malformed)?;
    let state = u64_at(&head, UNICODE_STATE).ok_or(CodeError::Malformed)?;
    let kind = (state >> 2) & 7;
    let (compact, ascii) = (state & (1 << 5) != 0, state & (1 << 6) != 0);
    if !compact || !matches!(kind, 1 | 2 | 4) {
        return Err(CodeError::Malformed);
    }
    let data = at
        + if ascii {
            layout.ascii_size
        } else {
            layout.compact_size
        };
    let chars = length.min(MAX_NAME_CHARS);
    let mut raw = vec![0u8; usize::try_from(chars * kind).map_err(|_| CodeError::Malformed)?];
    memory.read(data, &mut raw)?;
    Ok(match kind {
        1 => raw.iter().map(|&b| char::from(b)).collect(),
        2 => char::decode_utf16(
            raw.chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]])),
        )
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect(),
        _ => raw
            .chunks_exact(4)
            .map(|c| {
                char::from_u32(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .unwrap_or(char::REPLACEMENT_CHARACTER)
            })
            .collect(),
    })
}

/// The contents of the `bytes` object at `at`.
fn bytes(memory: Memory, at: u64) -> Result<Vec<u8>, CodeError> {
    let mut head = [0u8; 24];
    memory.read(at, &mut head)?;
    let len = u64_at(&head, VAR_SIZE)
        .ok_or(CodeError::Malformed)?
        .min(MAX_LINE_TABLE);
    let mut data = vec![0u8; usize::try_from(len).map_err(|_| CodeError::Malformed)?];
    memory.read(at + BYTES_DATA, &mut data)?;
    Ok(data)
}

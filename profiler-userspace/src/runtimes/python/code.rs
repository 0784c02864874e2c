//! A code object's names, read from the process that runs it: its
//! (qualified) name, file name, first line and line table, read once per
//! code object when the walk first records it.
use std::{io, sync::Arc};

use super::{
    binary::Interpreter,
    layout::{BYTES_DATA, Layout, LineTable, OB_TYPE, UNICODE_STATE, VAR_SIZE},
    lines::line_of,
};
use crate::process::memory::{Memory, u64_at};

/// Longest name read (characters); longer ones are cut.
const MAX_NAME_CHARS: u64 = 1024;
/// Longest line table read (bytes); a longer one gives lines past it
/// as the function's first.
const MAX_LINE_TABLE: u64 = 1 << 16;
/// Bytes read from the start of a code object's name, file name and line
/// table, the three in one call: most fit whole, header and data, and the
/// rest of a longer one takes one more call (each header and then its
/// data took six). An object too near its mapping's end for this much is
/// read on its own.
const PREFIX: usize = 256;

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
    pub(super) line_table: Vec<u8>,
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
    let at = [
        pointer(fields.qualname.unwrap_or(fields.name))?,
        pointer(fields.filename)?,
        pointer(fields.line_table)?,
    ];
    let (name, file, line_table) = match prefixed(memory, layout, at) {
        Some(read) => read?,
        None => (
            string(memory, layout, at[0])?,
            string(memory, layout, at[1])?,
            bytes(memory, at[2])?,
        ),
    };
    Ok(CodeInfo {
        name,
        file,
        first_line,
        line_table,
        lines: layout.lines,
        instructions: fields.instructions,
    })
}

/// A code object's name, file name and line table.
type Names = (String, String, Vec<u8>);

/// The name and file name (`str` objects) and the line table (`bytes`)
/// at `at`, from a [`PREFIX`] of each read in one call; `None` when a
/// prefix cannot be read.
fn prefixed(memory: Memory, layout: &Layout, at: [u64; 3]) -> Option<Result<Names, CodeError>> {
    let mut prefixes = vec![0u8; 3 * PREFIX];
    memory
        .read_many(&at.map(|a| (a, PREFIX)), &mut prefixes)
        .ok()?;
    Some(from_prefixes(memory, layout, at, &prefixes))
}

/// The three objects at `at` from their `prefixes`, and what did not fit
/// in them read in one more call.
fn from_prefixes(
    memory: Memory,
    layout: &Layout,
    at: [u64; 3],
    prefixes: &[u8],
) -> Result<Names, CodeError> {
    let heads: Vec<&[u8]> = prefixes.chunks(PREFIX).collect();
    let name = string_data(layout, heads[0], at[0])?;
    let file = string_data(layout, heads[1], at[1])?;
    let table = bytes_data(heads[2], at[2])?;
    let mut data: [Vec<u8>; 3] = Default::default();
    let mut rest = Vec::new();
    for (i, (start, len)) in [name.0, file.0, table].into_iter().enumerate() {
        let offset = usize::try_from(start - at[i])
            .map_err(|_| CodeError::Malformed)?
            .min(PREFIX);
        let have = (PREFIX - offset).min(len);
        data[i] = heads[i][offset..offset + have].to_vec();
        if have < len {
            rest.push((i, start + have as u64, len - have));
        }
    }
    if !rest.is_empty() {
        let spans: Vec<(u64, usize)> = rest.iter().map(|&(_, at, len)| (at, len)).collect();
        let mut more = vec![0u8; spans.iter().map(|s| s.1).sum()];
        memory.read_many(&spans, &mut more)?;
        let mut more = more.as_slice();
        for (i, _, len) in rest {
            let (part, after) = more.split_at(len);
            data[i].extend_from_slice(part);
            more = after;
        }
    }
    let [name_data, file_data, table_data] = data;
    Ok((
        decode(name.1, &name_data),
        decode(file.1, &file_data),
        table_data,
    ))
}

/// The `str` object at `at`: compact strings only (every name and file
/// name of a code object is one).
fn string(memory: Memory, layout: &Layout, at: u64) -> Result<String, CodeError> {
    let mut head = [0u8; 40];
    memory.read(at, &mut head)?;
    let ((data, len), kind) = string_data(layout, &head, at)?;
    let mut raw = vec![0u8; len];
    memory.read(data, &mut raw)?;
    Ok(decode(kind, &raw))
}

/// Where the text of the `str` object at `at`, whose header is `head`, is
/// (address, bytes; cut at [`MAX_NAME_CHARS`]), and its kind (bytes per
/// character).
fn string_data(layout: &Layout, head: &[u8], at: u64) -> Result<((u64, usize), u64), CodeError> {
    let length = u64_at(head, VAR_SIZE).ok_or(CodeError::Malformed)?;
    let state = u64_at(head, UNICODE_STATE).ok_or(CodeError::Malformed)?;
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
    let len = length.min(MAX_NAME_CHARS) * kind;
    Ok((
        (
            data,
            usize::try_from(len).map_err(|_| CodeError::Malformed)?,
        ),
        kind,
    ))
}

/// The text of `raw`, `kind` bytes per character.
fn decode(kind: u64, raw: &[u8]) -> String {
    match kind {
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
    }
}

/// The contents of the `bytes` object at `at`.
fn bytes(memory: Memory, at: u64) -> Result<Vec<u8>, CodeError> {
    let mut head = [0u8; 24];
    memory.read(at, &mut head)?;
    let (data, len) = bytes_data(&head, at)?;
    let mut raw = vec![0u8; len];
    memory.read(data, &mut raw)?;
    Ok(raw)
}

/// Where the contents of the `bytes` object at `at`, whose header is
/// `head`, are (address, bytes; cut at [`MAX_LINE_TABLE`]).
fn bytes_data(head: &[u8], at: u64) -> Result<(u64, usize), CodeError> {
    let len = u64_at(head, VAR_SIZE)
        .ok_or(CodeError::Malformed)?
        .min(MAX_LINE_TABLE);
    Ok((
        at + BYTES_DATA,
        usize::try_from(len).map_err(|_| CodeError::Malformed)?,
    ))
}

//! What the goroutine reader needs to know of one Go binary: its Go
//! version, where the runtime keeps its goroutine list (`runtime.allgs`),
//! the offsets of a goroutine's fields and the names of its wait reasons.
//! From the symbol table and DWARF when the binary has them, else from
//! its code and the table of known versions.
use std::{fs, path::Path, sync::Arc};

use object::{Object as _, ObjectSection as _, ObjectSegment as _, ObjectSymbol as _};

use super::{known, labels, layout::Layout};
use crate::gopclntab::GoTable;

/// Everything read from one Go binary.
#[derive(Clone, Debug)]
pub struct GoRuntime {
    /// As `go version` prints it, e.g. `go1.21.13`.
    pub version: String,
    pub layout: Layout,
    /// Link-time address of `runtime.allgs` (a `[]*g`).
    pub allgs: u64,
    /// The runtime's `waitReasonStrings`, indexed by `g.waitreason`;
    /// empty when unknown.
    pub wait_reasons: Vec<String>,
    /// The same names, shared by the rows that carry them.
    wait_reason_names: Vec<Arc<str>>,
    /// The executable segment's link-time address less its file offset:
    /// a mapping of it at `start` (file offset `offset`) has the load
    /// bias `start - offset - text_delta`.
    pub text_delta: u64,
    /// How its pprof label sets are kept.
    pub labels: labels::Form,
    /// Where a thread keeps its `g`: an offset from its thread pointer.
    pub tls_g: i64,
    /// The file offset of `runtime.ready`, where the goroutine wakers'
    /// probe goes; found only when asked for ([`Self::find_ready`]).
    pub ready_offset: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("reading the binary")]
    Read(#[source] std::io::Error),
    #[error("parsing the ELF file")]
    Elf(#[source] object::Error),
    #[error("reading its DWARF")]
    Dwarf(#[source] gimli::Error),
    #[error("{0}: no goroutine offsets known for this Go version (and no DWARF)")]
    UnknownVersion(String),
    #[error("{0}: runtime.allgs not found (no symbol table; runtime.allgadd not recognised)")]
    NoAllgs(String),
}

impl GoRuntime {
    /// The runtime facts of the binary at `path`; `None` when it is not a
    /// Go binary.
    ///
    /// # Errors
    /// When it cannot be read, or is a Go binary whose goroutines this
    /// reader cannot find (the error says which part is missing).
    pub fn of_binary(path: &Path) -> Result<Option<Self>, RuntimeError> {
        let file = fs::File::open(path).map_err(RuntimeError::Read)?;
        // Private, as every mapping the daemon makes itself
        // (`symbolize/resident.rs` takes shared ones for blazesym's).
        // SAFETY: read-only and private; a binary truncated while mapped
        // is the hazard every reader of binaries here accepts (see
        // `GoTable::open`).
        let map = unsafe { memmap2::MmapOptions::new().map_copy_read_only(&file) }
            .map_err(RuntimeError::Read)?;
        Self::of_data(&map)
    }

    /// As [`Self::of_binary`], over the binary's bytes.
    ///
    /// # Errors
    /// As [`Self::of_binary`].
    pub fn of_data(data: &[u8]) -> Result<Option<Self>, RuntimeError> {
        let file = object::File::parse(data).map_err(RuntimeError::Elf)?;
        let Some(version) = build_version(&file) else {
            return Ok(None);
        };
        let symbols: Vec<(String, u64, u64)> = file
            .symbols()
            .filter_map(|s| Some((s.name().ok()?.to_owned(), s.address(), s.size())))
            .filter(|(n, _, _)| {
                ["runtime.allgs", "runtime.waitReasonStrings", "runtime.tlsg"].contains(&n.as_str())
            })
            .collect();
        let symbol = |name: &str| symbols.iter().find(|(n, _, _)| n == name);
        let known = minor(&version).and_then(known::known);
        let layout = match super::dwarf::layout(&file).map_err(RuntimeError::Dwarf)? {
            Some(layout) => layout,
            None => known
                .map(|k| k.layout)
                .ok_or_else(|| RuntimeError::UnknownVersion(version.clone()))?,
        };
        let allgs = match symbol("runtime.allgs") {
            Some(&(_, address, _)) => address,
            None => allgs_from_code(data).ok_or_else(|| RuntimeError::NoAllgs(version.clone()))?,
        };
        let wait_reasons = symbol("runtime.waitReasonStrings")
            .and_then(|&(_, address, size)| strings_at(&file, address, size / 16))
            .or_else(|| known.map(|k| k.wait_reasons.iter().map(|&s| s.to_owned()).collect()))
            .unwrap_or_default();
        let text_delta = file
            .segments()
            .find(|s| matches!(s.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0))
            .map_or(0, |s| s.address().wrapping_sub(s.file_range().0));
        let wait_reason_names = wait_reasons.iter().map(|s| Arc::from(s.as_str())).collect();
        let labels = labels::Form::of_minor(minor(&version).unwrap_or(0));
        let tls_g = tls_g(&file, symbol("runtime.tlsg").map(|&(_, offset, _)| offset));
        Ok(Some(Self {
            version,
            layout,
            allgs,
            wait_reasons,
            wait_reason_names,
            text_delta,
            labels,
            tls_g,
            ready_offset: None,
        }))
    }

    /// Finds `runtime.ready` in the binary's `data` (by its `.gopclntab`
    /// name: stripped binaries keep it) for [`Self::ready_offset`].
    #[must_use]
    pub fn find_ready(mut self, data: &[u8]) -> Self {
        self.ready_offset = GoTable::from_data(data)
            .ok()
            .flatten()
            .and_then(|table| {
                let (entry, code) = table.function_code("runtime.ready")?;
                Some(entry + probe_point(code))
            })
            .and_then(|at| at.checked_sub(self.text_delta));
        self
    }

    /// The name of wait reason `index`, as Go's tracebacks print it.
    #[must_use]
    pub fn wait_reason(&self, index: u8) -> Arc<str> {
        match self.wait_reason_names.get(usize::from(index)) {
            Some(name) if !name.is_empty() => Arc::clone(name),
            _ => Arc::from(format!("waitreason {index}")),
        }
    }
}

/// Where in a function whose code is `code` a probe costs least: at the
/// branch of its stack check (`CMPQ 0x10(R14), SP; JBE …`, the prologue of
/// a Go function with a small frame), which the kernel emulates, rather
/// than at the compare, which it must step out of line (a second trap);
/// the registers are the entry's there. At the entry (0) otherwise.
fn probe_point(code: &[u8]) -> u64 {
    const STACK_CHECK: [u8; 4] = [0x49, 0x3b, 0x66, 0x10];
    match code {
        [a, b, c, d, 0x76, ..] | [a, b, c, d, 0x0f, 0x86, ..]
            if [*a, *b, *c, *d] == STACK_CHECK =>
        {
            4
        }
        _ => 0,
    }
}

/// Where the thread's `g` is, from its thread pointer: `runtime.tlsg` in
/// the executable's TLS block (at its start where the symbol table is
/// gone: Go's own linker puts it first); -8 for a binary without one.
fn tls_g(file: &object::File<'_>, tlsg: Option<u64>) -> i64 {
    crate::runtimes::tls::static_tls_offset(file, tlsg.unwrap_or(0)).unwrap_or(-8)
}

/// The Go version in `.go.buildinfo` (Go 1.18+ keeps it inline: a magic,
/// pointer size, flags with bit 2 set, then at 32 a varint length and
/// the string).
fn build_version(file: &object::File<'_>) -> Option<String> {
    let data = file.section_by_name(".go.buildinfo")?.data().ok()?;
    if data.get(..14)? != b"\xff Go buildinf:" || data.get(15)? & 2 == 0 {
        return None;
    }
    let (len, used) = varint(data.get(32..)?)?;
    let start = 32 + used;
    let bytes = data.get(start..start + usize::try_from(len).ok()?)?;
    String::from_utf8(bytes.to_vec()).ok()
}

fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// The minor version of `go1.MINOR[.PATCH]` (a release candidate's too).
fn minor(version: &str) -> Option<u32> {
    let rest = version.strip_prefix("go1.")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// `runtime.allgs` of a binary without symbols, from the code of
/// `runtime.allgadd` (found by its `.gopclntab` name). That function
/// appends to the slice, so it addresses the slice's pointer, length and
/// capacity: three RIP-relative operands at A, A+8 and A+16.
#[must_use]
pub fn allgs_from_code(data: &[u8]) -> Option<u64> {
    let table = GoTable::from_data(data).ok()??;
    let (entry, code) = table.function_code("runtime.allgadd")?;
    let targets = rip_relative_targets(entry, code);
    targets
        .iter()
        .copied()
        .find(|&a| targets.contains(&(a + 8)) && targets.contains(&(a + 16)))
}

/// The addresses of the 64-bit RIP-relative `mov`, `lea` and `cmp`
/// operands in `code` (at `entry`): REX.W, the opcode, a ModRM byte with
/// mod 00 and r/m 101, then a 32-bit displacement from the next
/// instruction. A scan of every offset can see such bytes inside other
/// instructions; callers look for a pattern no stray match makes.
fn rip_relative_targets(entry: u64, code: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    for (i, w) in code.windows(7).enumerate() {
        let rex_w = w[0] & 0xf8 == 0x48;
        let opcode = matches!(w[1], 0x8b | 0x89 | 0x8d | 0x39 | 0x3b);
        if rex_w && opcode && w[2] & 0xc7 == 0x05 {
            let disp = i64::from(i32::from_le_bytes([w[3], w[4], w[5], w[6]]));
            let next = entry + i as u64 + 7;
            out.push(next.wrapping_add_signed(disp));
        }
    }
    out
}

/// `count` Go strings (pointer, length) at `address`, read from the
/// file: right for a binary linked at a fixed address, `None` where the
/// pointers are left to relocations (PIE).
fn strings_at(file: &object::File<'_>, address: u64, count: u64) -> Option<Vec<String>> {
    let read = |at: u64, len: u64| -> Option<&[u8]> {
        file.segments().find_map(|s| {
            let rel = at.checked_sub(s.address())?;
            let end = rel.checked_add(len)?;
            s.data()
                .ok()?
                .get(usize::try_from(rel).ok()?..usize::try_from(end).ok()?)
        })
    };
    let table = read(address, count.checked_mul(16)?)?;
    table
        .chunks_exact(16)
        .map(|entry| {
            let ptr = u64::from_le_bytes(entry[..8].try_into().ok()?);
            let len = u64::from_le_bytes(entry[8..].try_into().ok()?);
            if len == 0 {
                return Some(String::new());
            }
            String::from_utf8(read(ptr, len)?.to_vec()).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_varints() {
        assert_eq!(minor("go1.21.13"), Some(21));
        assert_eq!(minor("go1.27rc1"), Some(27));
        assert_eq!(minor("devel"), None);
        assert_eq!(varint(&[0x96, 0x01]), Some((150, 2)));
        assert_eq!(varint(&[0x80; 11]), None);
    }

    #[test]
    fn rip_relative_operands_are_decoded() {
        // mov 0x10(%rip),%rax at 0x1000 (7 bytes: next is 0x1007); lea
        // -0x8(%rip),%rcx; then bytes that match nothing.
        let code = [
            0x48, 0x8b, 0x05, 0x10, 0, 0, 0, 0x48, 0x8d, 0x0d, 0xf8, 0xff, 0xff, 0xff, 0x90,
        ];
        assert_eq!(rip_relative_targets(0x1000, &code), [0x1017, 0x1006]);
    }

    #[test]
    fn the_probe_goes_on_the_stack_check_s_branch() {
        // CMPQ 0x10(R14), SP; JBE rel32 (Go 1.19 and 1.27's ready).
        let code = [0x49, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0xe2, 0x01, 0, 0];
        assert_eq!(probe_point(&code), 4);
        assert_eq!(probe_point(&[0x49, 0x3b, 0x66, 0x10, 0x76, 0x10]), 4);
        // A large frame's check (LEAQ -X(SP), R12 first): the entry.
        assert_eq!(probe_point(&[0x4c, 0x8d, 0x64, 0x24, 0xb0, 0x4d]), 0);
        assert_eq!(probe_point(&[0x49, 0x3b]), 0);
    }

    #[test]
    fn a_file_that_is_not_go_has_no_runtime() {
        let exe = std::env::current_exe().unwrap();
        assert!(GoRuntime::of_binary(&exe).unwrap().is_none());
    }
}

//! Function names, files, lines and inlined frames from a Go binary's
//! `.gopclntab`, which every Go binary keeps even when stripped
//! (`-ldflags=-s -w`), because the runtime needs it for its own tracebacks.
//!
//! The table's header magic tells its layout: Go 1.2 to 1.15, 1.16-1.17,
//! 1.18-1.19 and 1.20 and later (Go's `debug/gosym` and
//! `runtime/symtab.go` describe them). Inlined frames come from each
//! function's inline tree, found through the runtime's module data
//! (`runtime.firstmoduledata`, located by its pointer to the table).
//! Corrupt or truncated tables give `None`, never a wrong name.
mod layout;
mod pcvalue;

use std::{fs, io, path::Path};

use memmap2::Mmap;
use object::{Object as _, ObjectSection as _, ObjectSegment as _};

pub use layout::Version;
use layout::{Func, Header};

/// Offset of `text` in the runtime's `moduledata` (amd64), the same from
/// Go 1.16 to 1.27: after the table pointer, six slices, `findfunctab`,
/// `minpc` and `maxpc`.
const MODULEDATA_TEXT: u64 = 176;

/// One source-level frame at a PC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub function: String,
    pub file: String,
    pub line: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum GoError {
    #[error("reading {0}")]
    Read(String, #[source] io::Error),
    #[error("parsing the ELF file")]
    Elf(#[source] object::Error),
}

/// A loaded segment: where its bytes are in the file.
#[derive(Clone, Copy, Debug)]
struct Segment {
    address: u64,
    file_offset: u64,
    file_size: u64,
}

/// A Go binary's symbol table, over the binary's bytes (mapped from its
/// file, or borrowed).
pub struct GoTable<D = Mmap> {
    map: D,
    segments: Vec<Segment>,
    header: Header,
    /// `go:func.*`, the base of Go 1.18+'s funcdata offsets; `None` when
    /// the module data was not found (no inlined frames then).
    gofunc: Option<u64>,
}

impl GoTable<Mmap> {
    /// The table of the Go binary at `path`; `None` when it has none (not
    /// a Go binary, or a table this parser does not know).
    ///
    /// # Errors
    /// When the file cannot be read or is not ELF.
    pub fn open(path: &Path) -> Result<Option<Self>, GoError> {
        let file =
            fs::File::open(path).map_err(|e| GoError::Read(path.display().to_string(), e))?;
        // Private, as every mapping the daemon makes itself
        // (`symbolize/resident.rs` takes shared ones for blazesym's).
        // SAFETY: the mapping is read-only and private; a binary replaced
        // on disk is a new inode, and one truncated while mapped is the
        // same hazard every symbolizer here (blazesym) accepts.
        let map = unsafe { memmap2::MmapOptions::new().map_copy_read_only(&file) }
            .map_err(|e| GoError::Read(path.display().to_string(), e))?;
        Self::from_data(map)
    }
}

impl<D: AsRef<[u8]>> GoTable<D> {
    /// The table of the Go binary whose bytes are `map`; `None` when it
    /// has none.
    ///
    /// # Errors
    /// When the bytes are not ELF.
    pub fn from_data(map: D) -> Result<Option<Self>, GoError> {
        let elf = object::File::parse(map.as_ref()).map_err(GoError::Elf)?;
        let segments: Vec<Segment> = elf
            .segments()
            .map(|s| {
                let (file_offset, file_size) = s.file_range();
                Segment {
                    address: s.address(),
                    file_offset,
                    file_size,
                }
            })
            .collect();
        let text = elf.section_by_name(".text").map(|s| s.address());
        // PIE builds put it in RELRO data. A binary without either section
        // is searched only if it has no section headers or is Go: other
        // stripped binaries, most of a host's, have no table to find.
        let named = [".gopclntab", ".data.rel.ro.gopclntab"]
            .into_iter()
            .find_map(|name| elf.section_by_name(name));
        let found = match named {
            Some(section) => section
                .file_range()
                .map(|(offset, _)| (offset, section.address())),
            None if elf.sections().next().is_none()
                || elf.section_by_name(".go.buildinfo").is_some() =>
            {
                find_by_magic(map.as_ref(), &segments)
            }
            None => None,
        };
        drop(elf);
        let Some((offset, address)) = found else {
            return Ok(None);
        };
        let Some(header) = Header::parse(map.as_ref(), offset, address, text) else {
            return Ok(None);
        };
        let mut table = Self {
            map,
            segments,
            header,
            gofunc: None,
        };
        if text.is_none() {
            // No section headers: the code's start (1.18+'s functions are
            // offsets from it) is `moduledata.text`, which the runtime
            // fills in; the header's copy may be left 0 in the file.
            let text = table
                .find_moduledata()
                .and_then(|md| table.u64_at(md + MODULEDATA_TEXT));
            match Header::parse(table.map.as_ref(), offset, address, text) {
                Some(header) => table.header = header,
                None => return Ok(None),
            }
        }
        table.gofunc = table.find_gofunc();
        Ok(Some(table))
    }

    #[must_use]
    pub fn version(&self) -> Version {
        self.header.version
    }

    /// The bytes at virtual address `address`, to the end of its segment.
    fn at_address(&self, address: u64) -> Option<&[u8]> {
        let segment = self
            .segments
            .iter()
            .find(|s| (s.address..s.address + s.file_size).contains(&address))?;
        let start = usize::try_from(segment.file_offset + (address - segment.address)).ok()?;
        let end = usize::try_from(segment.file_offset + segment.file_size).ok()?;
        self.map.as_ref().get(start..end)
    }

    fn u64_at(&self, address: u64) -> Option<u64> {
        let bytes = self.at_address(address)?.get(..8)?;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }

    /// `runtime.firstmoduledata.gofunc`: the module data is the word that
    /// points at the table, followed by the function name table's slice;
    /// of the places `gofunc` may be in it, the one whose inline trees
    /// read as inline trees.
    fn find_gofunc(&self) -> Option<u64> {
        let moduledata = self.find_moduledata()?;
        self.header
            .version
            .gofunc_offsets()
            .iter()
            .filter_map(|&offset| self.u64_at(moduledata + offset))
            .find(|&gofunc| self.inline_trees_read_with(gofunc))
    }

    /// The address of `runtime.firstmoduledata`.
    fn find_moduledata(&self) -> Option<u64> {
        let table = self.header.address;
        let names = table + self.header.funcnametab_offset;
        for segment in &self.segments {
            let start = usize::try_from(segment.file_offset).ok()?;
            let len = usize::try_from(segment.file_size).ok()?;
            let bytes = self.map.as_ref().get(start..start + len)?;
            for (i, word) in bytes.chunks_exact(8).enumerate() {
                if u64::from_le_bytes(word.try_into().ok()?) != table {
                    continue;
                }
                let here = segment.address + 8 * i as u64;
                if self.u64_at(here + 8) == Some(names) {
                    return Some(here);
                }
            }
        }
        None
    }

    /// Whether, taking `gofunc` as the funcdata base, the first inline
    /// trees found (up to 32) name real functions at call sites inside
    /// their callers.
    fn inline_trees_read_with(&self, gofunc: u64) -> bool {
        let mut checked = 0;
        for i in 0..self.header.nfunc {
            let Some((func, end)) = self.header.func_at(self.map.as_ref(), i) else {
                return false;
            };
            let Some(address) = self.header.funcdata_address(
                self.map.as_ref(),
                &func,
                layout::FUNCDATA_INL_TREE,
                Some(gofunc),
            ) else {
                continue;
            };
            let Some(call) = self
                .at_address(address)
                .and_then(|tree| self.header.version.inlined_call(tree, 0))
            else {
                return false;
            };
            let inside = u64::try_from(call.parent_pc).is_ok_and(|pc| func.entry + pc < end);
            if !inside || self.header.name(self.map.as_ref(), call.name_off).is_none() {
                return false;
            }
            checked += 1;
            if checked == 32 {
                break;
            }
        }
        checked > 0
    }

    /// The frames at `pc`, innermost (inlined) first, the function that
    /// contains `pc` last; `None` when `pc` is in no function or the
    /// tables are corrupt.
    #[must_use]
    pub fn frames(&self, pc: u64) -> Option<Vec<Frame>> {
        let func = self.header.find(self.map.as_ref(), pc)?;
        let mut frames = Vec::new();
        let mut at = pc;
        if let Some(inline) = self.inline_tree(&func) {
            // Each inlined call names the callee; its position is where
            // `at` is; then `at` moves to the call site in its parent.
            for _ in 0..64 {
                let Some(index) = self.pcdata(&func, layout::PCDATA_INL_TREE_INDEX, at) else {
                    break;
                };
                let Ok(index) = usize::try_from(index) else {
                    break;
                };
                let call = self.header.version.inlined_call(inline, index)?;
                frames.push(self.frame(
                    &func,
                    self.header.name(self.map.as_ref(), call.name_off)?,
                    at,
                ));
                at = func.entry + u64::try_from(call.parent_pc).ok()?;
            }
        }
        frames.push(self.frame(
            &func,
            self.header.name(self.map.as_ref(), func.name_off)?,
            at,
        ));
        Some(frames)
    }

    fn frame(&self, func: &Func, function: String, pc: u64) -> Frame {
        let file = self
            .value(func, func.pcfile, pc)
            .and_then(|n| self.header.file(self.map.as_ref(), func, n))
            .unwrap_or_default();
        let line = self.value(func, func.pcln, pc).unwrap_or(0);
        Frame {
            function,
            file,
            line: u32::try_from(line).unwrap_or(0),
        }
    }

    /// The value of the pc-value table at `offset` (into pctab) at `pc`.
    fn value(&self, func: &Func, offset: u32, pc: u64) -> Option<i32> {
        if offset == 0 {
            return None;
        }
        let table = self.header.pctab(self.map.as_ref(), offset)?;
        pcvalue::at(table, func.entry, self.header.quantum, pc)
    }

    /// Pcdata table `index` of `func` at `pc`.
    fn pcdata(&self, func: &Func, index: u32, pc: u64) -> Option<i32> {
        let offset = self.header.pcdata_offset(self.map.as_ref(), func, index)?;
        self.value(func, offset, pc)
    }

    /// The bytes of `func`'s inline tree, when it has one.
    fn inline_tree(&self, func: &Func) -> Option<&[u8]> {
        let address = self.header.funcdata_address(
            self.map.as_ref(),
            func,
            layout::FUNCDATA_INL_TREE,
            self.gofunc,
        )?;
        self.at_address(address)
    }

    /// The name of the function that contains `pc` (not its inlined
    /// callees).
    #[must_use]
    pub fn function_name(&self, pc: u64) -> Option<String> {
        let func = self.header.find(self.map.as_ref(), pc)?;
        self.header.name(self.map.as_ref(), func.name_off)
    }

    /// The entry of the function that contains `pc`.
    #[must_use]
    pub fn function_entry(&self, pc: u64) -> Option<u64> {
        Some(self.header.find(self.map.as_ref(), pc)?.entry)
    }

    /// How far SP is below its value at the function's entry, at `pc`
    /// (the `pcsp` table): the return address is that far above SP.
    #[must_use]
    pub fn sp_delta(&self, pc: u64) -> Option<i32> {
        let func = self.header.find(self.map.as_ref(), pc)?;
        self.value(&func, func.pcsp, pc)
    }

    /// The code of the function named `name`: its entry and its bytes.
    #[must_use]
    pub fn function_code(&self, name: &str) -> Option<(u64, &[u8])> {
        let map = self.map.as_ref();
        let (func, end) = (0..self.header.nfunc)
            .filter_map(|i| self.header.func_at(map, i))
            .find(|(f, _)| self.header.name(map, f.name_off).as_deref() == Some(name))?;
        let len = usize::try_from(end.checked_sub(func.entry)?).ok()?;
        Some((func.entry, self.at_address(func.entry)?.get(..len)?))
    }

    /// Every function: entry, end (the next function's entry) and its SP
    /// delta table, for unwinding.
    pub fn functions(&self) -> impl Iterator<Item = (u64, u64, Vec<(u64, u64, i32)>)> + '_ {
        (0..self.header.nfunc).filter_map(move |i| {
            let (func, end) = self.header.func_at(self.map.as_ref(), i)?;
            let mut rows = Vec::new();
            let table = self.header.pctab(self.map.as_ref(), func.pcsp)?;
            pcvalue::walk(table, func.entry, self.header.quantum, |s, e, v| {
                rows.push((s, e.min(end), v));
                e < end
            })?;
            Some((func.entry, end, rows))
        })
    }
}

/// Where the table is in a binary without section headers: the header's
/// magic, padding, quantum and pointer size, in a loaded segment.
fn find_by_magic(map: &[u8], segments: &[Segment]) -> Option<(u64, u64)> {
    for segment in segments {
        let start = usize::try_from(segment.file_offset).ok()?;
        let bytes = map.get(start..start + usize::try_from(segment.file_size).ok()?)?;
        for (i, window) in bytes.windows(8).enumerate().step_by(4) {
            let magic = u32::from_le_bytes(window[..4].try_into().ok()?);
            if Version::from_magic(magic).is_some() && window[4..8] == [0, 0, 1, 8] {
                return Some((segment.file_offset + i as u64, segment.address + i as u64));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_a_table_has_none() {
        let exe = std::env::current_exe().unwrap();
        assert!(GoTable::open(&exe).unwrap().is_none());
        // A distribution's stripped C program.
        assert!(GoTable::open(Path::new("/usr/bin/true")).unwrap().is_none());
    }

    /// A stripped Go program built as distributions package Go
    /// (`-buildmode=pie`), which keeps its table in RELRO data.
    #[test]
    fn a_stripped_pie_go_program_has_its_table_found() {
        let dir = tempfile::tempdir().unwrap();
        let bin = crate::testing::go_build(
            dir.path(),
            "package main\n\nfunc main() { println(1) }\n",
            "pie",
            &["-buildmode=pie", "-ldflags=-s -w"],
        );
        let table = GoTable::open(&bin).unwrap().expect("a table");
        let (entry, _) = table.function_code("main.main").expect("main.main");
        assert_eq!(table.function_name(entry).as_deref(), Some("main.main"));
    }
}

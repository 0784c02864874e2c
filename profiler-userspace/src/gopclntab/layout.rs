//! The table's layouts by Go version: its header, the function table, one
//! function's `_func` record, and inline tree entries. Every read is
//! bounds-checked; a field out of range gives `None`.

/// `_PCDATA_InlTreeIndex` and `_FUNCDATA_InlTree` (runtime/symtab.go).
pub const PCDATA_INL_TREE_INDEX: u32 = 2;
pub const FUNCDATA_INL_TREE: u32 = 3;

/// The table's format, from its magic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    /// Go 1.2 to 1.15.
    Go12,
    /// Go 1.16 and 1.17.
    Go116,
    /// Go 1.18 and 1.19.
    Go118,
    /// Go 1.20 and later.
    Go120,
}

/// One inlined call: the callee's name, and where in the parent it was
/// called (an offset from the function's entry).
pub struct InlinedCall {
    pub name_off: u32,
    pub parent_pc: i32,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// A NUL-terminated string: UTF-8 without control characters, or `None`
/// (a corrupt table must not give a wrong name).
fn cstring(bytes: &[u8]) -> Option<String> {
    let end = bytes.iter().take(4096).position(|&b| b == 0)?;
    let text = std::str::from_utf8(&bytes[..end]).ok()?;
    (!text.is_empty() && !text.chars().any(char::is_control)).then(|| text.to_owned())
}

fn usize_of(v: u64) -> Option<usize> {
    usize::try_from(v).ok()
}

impl Version {
    #[must_use]
    pub fn from_magic(magic: u32) -> Option<Self> {
        match magic {
            0xffff_fffb => Some(Self::Go12),
            0xffff_fffa => Some(Self::Go116),
            0xffff_fff0 => Some(Self::Go118),
            0xffff_fff1 => Some(Self::Go120),
            _ => None,
        }
    }

    /// Where `gofunc` may be in the runtime's `moduledata` (amd64), the
    /// base of funcdata offsets (1.18+): 304 in 1.18-1.19; 320 from 1.20
    /// (`covctrs` came before it); later releases added more fields before
    /// it (344 in 1.27), so each candidate is checked against the tables.
    #[must_use]
    pub fn gofunc_offsets(self) -> &'static [u64] {
        match self {
            Self::Go118 => &[304],
            Self::Go120 => &[320, 328, 336, 344, 352, 360],
            Self::Go12 | Self::Go116 => &[],
        }
    }

    /// Entry `index` of an inline tree.
    #[must_use]
    pub fn inlined_call(self, tree: &[u8], index: usize) -> Option<InlinedCall> {
        // 1.20+: funcID, pad[3], nameOff, parentPc, startLine.
        // Before: parent int16, funcID, pad, file, line, func_, parentPc.
        let (size, name, parent) = if self == Self::Go120 {
            (16, 4, 8)
        } else {
            (20, 12, 16)
        };
        let entry = tree.get(index * size..(index + 1) * size)?;
        Some(InlinedCall {
            name_off: u32_at(entry, name)?,
            parent_pc: u32_at(entry, parent)?.cast_signed(),
        })
    }

    /// Size of a `_func` record before its pcdata.
    fn func_size(self) -> usize {
        match self {
            Self::Go12 | Self::Go118 => 40,
            Self::Go116 | Self::Go120 => 44,
        }
    }

    /// Size of an entry or offset in the function table.
    fn functab_field(self) -> usize {
        if self >= Self::Go118 { 4 } else { 8 }
    }
}

/// One function's record.
#[derive(Clone, Debug)]
pub struct Func {
    pub entry: u64,
    pub name_off: u32,
    pub pcsp: u32,
    pub pcfile: u32,
    pub pcln: u32,
    npcdata: u32,
    cu_offset: u32,
    /// Where the record starts, in the mapped file.
    record: usize,
}

/// The table's header: where its parts are, in the mapped file.
#[derive(Clone, Debug)]
pub struct Header {
    pub version: Version,
    pub quantum: u32,
    pub nfunc: usize,
    /// The table's virtual address.
    pub address: u64,
    /// Offsets from the table's start.
    pub funcnametab_offset: u64,
    text_start: u64,
    base: usize,
    cutab: usize,
    filetab: usize,
    pctab: usize,
    funcdata: usize,
    functab: usize,
}

impl Header {
    /// Reads the header at file offset `offset` (virtual address
    /// `address`); `text` is the `.text` section's address, where known.
    pub fn parse(map: &[u8], offset: u64, address: u64, text: Option<u64>) -> Option<Self> {
        let base = usize_of(offset)?;
        let bytes = map.get(base..)?;
        let version = Version::from_magic(u32_at(bytes, 0)?)?;
        if bytes.get(4..6)? != [0, 0] || bytes[7] != 8 {
            return None;
        }
        let quantum = u32::from(bytes[6]);
        let word = |k: usize| u64_at(bytes, 8 + 8 * k);
        let nfunc = usize_of(word(0)?)?;
        let fields = match version {
            Version::Go12 => {
                let functab = 16;
                let filetab = u32_at(bytes, functab + (2 * nfunc + 1) * 8)?;
                (0, 0, 0, usize_of(u64::from(filetab))?, 0, 0, functab)
            }
            Version::Go116 | Version::Go118 | Version::Go120 => {
                // 1.18 put `textStart` before the table offsets.
                let (text_start, first) = if version == Version::Go116 {
                    (0, 2)
                } else {
                    (text.unwrap_or(word(2)?), 3)
                };
                let offset = |k: usize| word(first + k).and_then(usize_of);
                let data = offset(4)?;
                (
                    text_start,
                    word(first)?,
                    offset(1)?,
                    offset(2)?,
                    offset(3)?,
                    data,
                    data,
                )
            }
        };
        let (text_start, funcnametab_offset, cutab, filetab, pctab, funcdata, functab) = fields;
        let header = Self {
            version,
            quantum,
            nfunc,
            address,
            funcnametab_offset,
            text_start,
            base,
            cutab,
            filetab,
            pctab,
            funcdata,
            functab,
        };
        // The function table must fit, with its end entry.
        let end = functab + (2 * nfunc + 1) * version.functab_field();
        (nfunc > 0 && nfunc < 1 << 24 && bytes.len() >= end).then_some(header)
    }

    fn table<'a>(&self, map: &'a [u8], offset: usize) -> Option<&'a [u8]> {
        map.get(self.base.checked_add(offset)?..)
    }

    /// Entry `i` of the function table: (pc, record offset).
    fn functab_entry(&self, map: &[u8], i: usize) -> Option<(u64, usize)> {
        let table = self.table(map, self.functab)?;
        let field = self.version.functab_field();
        let at = 2 * i * field;
        if field == 4 {
            let pc = self.text_start + u64::from(u32_at(table, at)?);
            Some((pc, usize_of(u64::from(u32_at(table, at + 4)?))?))
        } else {
            Some((u64_at(table, at)?, usize_of(u64_at(table, at + 8)?)?))
        }
    }

    /// The function that contains `pc`.
    pub fn find(&self, map: &[u8], pc: u64) -> Option<Func> {
        let first = self.functab_entry(map, 0)?.0;
        let end = self.functab_entry(map, self.nfunc)?.0;
        if !(first..end).contains(&pc) {
            return None;
        }
        // The last entry whose pc is <= `pc`.
        let (mut lo, mut hi) = (0, self.nfunc);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.functab_entry(map, mid)?.0 <= pc {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        self.func_at(map, lo).map(|(func, _)| func)
    }

    /// Function `i` and the end of its code.
    pub fn func_at(&self, map: &[u8], i: usize) -> Option<(Func, u64)> {
        if i >= self.nfunc {
            return None;
        }
        let (_, offset) = self.functab_entry(map, i)?;
        let end = self.functab_entry(map, i + 1)?.0;
        let record = self.base.checked_add(self.funcdata)?.checked_add(offset)?;
        let bytes = map.get(record..)?;
        let wide = self.version < Version::Go118;
        let entry = if wide {
            u64_at(bytes, 0)?
        } else {
            self.text_start + u64::from(u32_at(bytes, 0)?)
        };
        let first = if wide { 8 } else { 4 };
        let field = |n: usize| u32_at(bytes, first + (n - 1) * 4);
        let func = Func {
            entry,
            name_off: field(1)?,
            pcsp: field(4)?,
            pcfile: field(5)?,
            pcln: field(6)?,
            npcdata: field(7)?,
            cu_offset: if self.version >= Version::Go116 {
                field(8)?
            } else {
                0
            },
            record,
        };
        Some((func, end))
    }

    /// The function name at `offset` in the name table.
    pub fn name(&self, map: &[u8], offset: u32) -> Option<String> {
        let names = usize_of(self.funcnametab_offset)?.checked_add(usize_of(offset.into())?)?;
        cstring(self.table(map, names)?)
    }

    /// The pc-value table at `offset` in pctab.
    pub fn pctab<'a>(&self, map: &'a [u8], offset: u32) -> Option<&'a [u8]> {
        self.table(map, self.pctab.checked_add(usize_of(offset.into())?)?)
    }

    /// The name of file number `n` of `func`.
    pub fn file(&self, map: &[u8], func: &Func, n: i32) -> Option<String> {
        let n = usize::try_from(n).ok()?;
        let offset = if self.version == Version::Go12 {
            u32_at(self.table(map, self.filetab)?, 4 * n)?
        } else {
            let index = usize_of(func.cu_offset.into())?.checked_add(n)?;
            let offset = u32_at(self.table(map, self.cutab)?, 4 * index)?;
            if offset == u32::MAX {
                return None;
            }
            u32::try_from(self.filetab.checked_add(usize_of(offset.into())?)?).ok()?
        };
        cstring(self.table(map, usize_of(offset.into())?)?)
    }

    /// The offset in pctab of `func`'s pcdata table `index`.
    pub fn pcdata_offset(&self, map: &[u8], func: &Func, index: u32) -> Option<u32> {
        if index >= func.npcdata {
            return None;
        }
        let at = func.record + self.version.func_size() + 4 * usize_of(index.into())?;
        u32_at(map, at).filter(|&o| o != 0)
    }

    /// The address of `func`'s funcdata `index`: an offset from `gofunc`
    /// (1.18+) or an address (before).
    pub fn funcdata_address(
        &self,
        map: &[u8],
        func: &Func,
        index: u32,
        gofunc: Option<u64>,
    ) -> Option<u64> {
        let size = self.version.func_size();
        let nfuncdata = u32::from(*map.get(func.record + size - 1)?);
        if index >= nfuncdata {
            return None;
        }
        let after_pcdata = func.record + size + 4 * usize_of(func.npcdata.into())?;
        let index = usize_of(index.into())?;
        if self.version >= Version::Go118 {
            let offset = u32_at(map, after_pcdata + 4 * index)?;
            (offset != u32::MAX).then(|| gofunc.map(|g| g + u64::from(offset)))?
        } else {
            let aligned = after_pcdata.next_multiple_of(8);
            u64_at(map, aligned + 8 * index).filter(|&a| a != 0)
        }
    }
}

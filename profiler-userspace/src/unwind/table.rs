//! One binary's unwind table, built from its `.eh_frame` (or, where it has
//! none, as in Go binaries, its `.debug_frame`) with gimli: the DWARF CFA
//! program of every function run into rows of [`UnwindRow`]. A stripped Go
//! binary has neither; its rows come from `.gopclntab`'s SP deltas.
use gimli::{
    BaseAddresses, CfaRule, CieOrFde, DebugFrame, EhFrame, LittleEndian, RegisterRule,
    UnwindContext, UnwindSection, X86_64,
};
use object::{Object as _, ObjectSection as _, ObjectSegment as _};
use profiler_common::unwind::{
    MAX_TABLE_ROWS, RowKind, UnwindMapping, UnwindRow, bucket_entries, bucket_shift,
};

use crate::gopclntab::GoTable;

/// A binary's rows, sorted by PC, relative to `base`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// The ELF virtual address row PCs are relative to.
    pub base: u64,
    pub rows: Vec<UnwindRow>,
    /// Where the table came from: `.eh_frame` or `.debug_frame`.
    pub source: &'static str,
    /// Rows whose rule this format cannot express (walked by frame pointer).
    pub unsupported: u64,
}

/// A loadable segment: where file offsets land in the ELF address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub file_offset: u64,
    pub file_size: u64,
    pub vaddr: u64,
}

/// What the unwinder needs from one ELF file.
#[derive(Clone, Debug, Default)]
pub struct ElfUnwindInfo {
    pub table: Table,
    pub segments: Vec<Segment>,
}

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("parsing the ELF file")]
    Elf(#[from] object::Error),
    #[error("reading its call frame information")]
    Cfi(#[from] gimli::Error),
    #[error("the table has more than {MAX_TABLE_ROWS} rows")]
    TooLarge,
    #[error("its code spans more than 4 GiB")]
    TooWide,
}

/// Builds the unwind table of the ELF image `data`. A binary with neither
/// `.eh_frame` nor `.debug_frame` gets an empty table.
///
/// # Errors
/// When the file is not ELF, its CFI is malformed, or the table does not
/// fit the kernel's format.
pub fn build(data: &[u8]) -> Result<ElfUnwindInfo, TableError> {
    let file = object::File::parse(data)?;
    // Executable loadable segments only: a mapping of code starts at the
    // page holding its segment's start, which may also hold the end of the
    // segment before it (lld packs segments without page padding).
    let segments = file
        .segments()
        .filter(|s| {
            matches!(s.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0)
        })
        .map(|s| {
            let (file_offset, file_size) = s.file_range();
            Segment {
                file_offset,
                file_size,
                vaddr: s.address(),
            }
        })
        .collect();
    let mut bases = BaseAddresses::default();
    for (name, set) in [
        (
            ".text",
            BaseAddresses::set_text as fn(BaseAddresses, u64) -> BaseAddresses,
        ),
        (".got", BaseAddresses::set_got),
        (".eh_frame_hdr", BaseAddresses::set_eh_frame_hdr),
        (".eh_frame", BaseAddresses::set_eh_frame),
    ] {
        if let Some(section) = file.section_by_name(name) {
            bases = set(bases, section.address());
        }
    }
    let mut spans = Vec::new();
    let mut unsupported = 0;
    let source = if let Some(data) = section_data(&file, ".eh_frame")? {
        let section = EhFrame::new(&data, LittleEndian);
        collect(&section, &bases, &mut spans, &mut unsupported)?;
        ".eh_frame"
    } else if let Some(debug_frame) = section_data(&file, ".debug_frame")? {
        let mut section = DebugFrame::new(&debug_frame, LittleEndian);
        section.set_address_size(8);
        collect(&section, &bases, &mut spans, &mut unsupported)?;
        go_vdso_callers(data, &mut spans);
        ".debug_frame"
    } else if go_spans(data, &mut spans) {
        go_vdso_callers(data, &mut spans);
        ".gopclntab"
    } else {
        ""
    };
    let table = rows_from_spans(spans, source, unsupported)?;
    Ok(ElfUnwindInfo { table, segments })
}

fn section_data<'a>(
    file: &object::File<'a>,
    name: &str,
) -> Result<Option<std::borrow::Cow<'a, [u8]>>, object::Error> {
    match file.section_by_name(name) {
        Some(section) => section
            .uncompressed_data()
            .map(|d| (!d.is_empty()).then_some(d)),
        None => Ok(None),
    }
}

/// A stripped Go binary's rows, from each function's SP delta table
/// (pcsp): the delta is how far rsp is below its value at entry, where the
/// return address is on top, so CFA = rsp + delta + 8. Go's own CFI says
/// nothing of rbp either, so it is left unchanged. Whether there were any.
fn go_spans(data: &[u8], spans: &mut Vec<Span>) -> bool {
    let Ok(Some(table)) = GoTable::from_data(data) else {
        return false;
    };
    let before = spans.len();
    for (_, _, rows) in table.functions() {
        for (start, end, delta) in rows {
            let rule = u16::try_from(i64::from(delta) + 8)
                .map_or((RowKind::FramePointer, 0, 0), |offset| {
                    (RowKind::Rsp, offset, 0)
                });
            spans.push(Span { start, end, rule });
        }
    }
    spans.len() > before
}

/// The Go functions that call the vDSO on the system stack: they move rsp
/// there by hand (`MOVQ (g_sched+gobuf_sp)(DX), SP`), which neither
/// their SP delta table nor Go's CFI follows.
const GO_VDSO_CALLERS: [&str; 3] = ["time.now", "runtime.nanotime1", "runtime.walltime"];

/// In a Go binary's [`GO_VDSO_CALLERS`], past the prologue (which pushed
/// rbp and pointed it at the frame: an rsp offset above 16), the frame
/// pointer finds the caller: CFA = rbp + 16, the caller's rbp at CFA - 16,
/// on the goroutine's stack, which may lie below the system stack
/// ([`RowKind::SwitchedStack`]).
/// By the SP delta, a sample in the vDSO (about 6% of a loop that reads
/// the clock) lost every frame below `time.now`.
fn go_vdso_callers(data: &[u8], spans: &mut [Span]) {
    let Ok(Some(table)) = GoTable::from_data(data) else {
        return;
    };
    for name in GO_VDSO_CALLERS {
        let Some((entry, code)) = table.function_code(name) else {
            continue;
        };
        let end = entry + code.len() as u64;
        for span in spans.iter_mut() {
            if (entry..end).contains(&span.start) && span.rule.0 == RowKind::Rsp && span.rule.1 > 16
            {
                span.rule = (RowKind::SwitchedStack, 16, -2);
            }
        }
    }
}

/// One CFI row: the rule for `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: u64,
    end: u64,
    rule: (RowKind, u16, i8),
}

fn collect<R: gimli::Reader<Offset = usize>, S: UnwindSection<R>>(
    section: &S,
    bases: &BaseAddresses,
    spans: &mut Vec<Span>,
    unsupported: &mut u64,
) -> Result<(), gimli::Error> {
    let mut ctx = UnwindContext::new();
    let mut entries = section.entries(bases);
    while let Some(entry) = entries.next()? {
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        // One bad FDE (e.g. a CIE it points at is missing) skips that
        // function, not the binary.
        let Ok(fde) = partial.parse(S::cie_from_offset) else {
            continue;
        };
        let signal = fde.is_signal_trampoline();
        let mut rows = fde.rows(section, bases, &mut ctx)?;
        while let Some(row) = rows.next_row()? {
            let rule = if signal {
                (RowKind::Signal, 0, 0)
            } else {
                rule_of(section, row)
            };
            *unsupported += u64::from(rule.0 == RowKind::FramePointer);
            spans.push(Span {
                start: row.start_address(),
                end: row.end_address(),
                rule,
            });
        }
    }
    Ok(())
}

/// A CFI row as the kernel's (kind, CFA offset, rbp offset / 8).
fn rule_of<R: gimli::Reader<Offset = usize>, S: UnwindSection<R>>(
    section: &S,
    row: &gimli::UnwindTableRow<usize>,
) -> (RowKind, u16, i8) {
    const UNSUPPORTED: (RowKind, u16, i8) = (RowKind::FramePointer, 0, 0);
    match row.register(X86_64::RA) {
        Some(RegisterRule::Undefined) => return (RowKind::End, 0, 0),
        None | Some(RegisterRule::Offset(-8)) => {}
        Some(_) => return UNSUPPORTED,
    }
    let (kind, offset) = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            let kind = match *register {
                X86_64::RSP => RowKind::Rsp,
                X86_64::RBP => RowKind::Rbp,
                _ => return UNSUPPORTED,
            };
            let Ok(offset) = u16::try_from(*offset) else {
                return UNSUPPORTED;
            };
            (kind, offset)
        }
        CfaRule::Expression(expr) => {
            return expr
                .get(section)
                .ok()
                .and_then(|e| e.0.to_slice().ok().and_then(|b| plt_threshold(&b)))
                .map_or(UNSUPPORTED, |threshold| (RowKind::Plt, threshold, 0));
        }
    };
    let rbp = match row.register(X86_64::RBP) {
        None | Some(RegisterRule::Undefined | RegisterRule::SameValue) => 0,
        Some(RegisterRule::Offset(at)) if at % 8 == 0 && at != 0 => match i8::try_from(at / 8) {
            Ok(at) => at,
            Err(_) => return UNSUPPORTED,
        },
        Some(_) => return UNSUPPORTED,
    };
    (kind, offset, rbp)
}

/// The CFA expression binutils emits for PLT entries:
/// `rsp + 8 + ((rip & 15) >= N) << 3`; returns `N`.
fn plt_threshold(expr: &[u8]) -> Option<u16> {
    const DW_OP_BREG7: u8 = 0x77;
    const DW_OP_BREG16: u8 = 0x80;
    const DW_OP_LIT0: u8 = 0x30;
    match expr {
        [
            DW_OP_BREG7,
            8,
            DW_OP_BREG16,
            0,
            0x3f,
            0x1a,
            lit,
            0x2a,
            0x33,
            0x24,
            0x22,
        ] if (DW_OP_LIT0..=DW_OP_LIT0 + 31).contains(lit) => Some(u16::from(lit - DW_OP_LIT0)),
        _ => None,
    }
}

/// Sorted, gap-marked, deduplicated rows: a gap between functions gets a
/// frame-pointer row, so a PC there is not unwound with the rule of the
/// function before it.
fn rows_from_spans(
    mut spans: Vec<Span>,
    source: &'static str,
    unsupported: u64,
) -> Result<Table, TableError> {
    spans.retain(|s| s.start < s.end);
    spans.sort_by_key(|s| (s.start, s.end));
    let Some(base) = spans.first().map(|s| s.start) else {
        return Ok(Table {
            source,
            ..Table::default()
        });
    };
    let mut rows: Vec<UnwindRow> = Vec::with_capacity(spans.len() + spans.len() / 4);
    let mut covered_to = base;
    let mut push = |pc: u64, (kind, cfa_offset, rbp_offset): (RowKind, u16, i8)| {
        let pc = u32::try_from(pc - base).map_err(|_| TableError::TooWide)?;
        let row = UnwindRow {
            pc,
            cfa_offset,
            kind: kind as u8,
            rbp_offset,
        };
        match rows.last_mut() {
            Some(last) if last.pc == pc => *last = row,
            Some(last)
                if (last.kind, last.cfa_offset, last.rbp_offset)
                    == (row.kind, row.cfa_offset, row.rbp_offset) => {}
            _ => rows.push(row),
        }
        Ok::<(), TableError>(())
    };
    for span in &spans {
        // Overlapping FDEs (rare, e.g. hand-written assembly): keep the
        // first one's rows.
        if span.start < covered_to && covered_to > base {
            if span.end <= covered_to {
                continue;
            }
        } else if span.start > covered_to {
            push(covered_to, (RowKind::FramePointer, 0, 0))?;
        }
        push(span.start.max(covered_to), span.rule)?;
        covered_to = span.end;
    }
    push(covered_to, (RowKind::FramePointer, 0, 0))?;
    if rows.len() > MAX_TABLE_ROWS as usize {
        return Err(TableError::TooLarge);
    }
    Ok(Table {
        base,
        rows,
        source,
        unsupported,
    })
}

impl Table {
    /// The table as the kernel's array holds it: its rows, then its bucket
    /// index (each entry a row index in `pc`), and the packed size for its
    /// mappings ([`UnwindMapping::table`]).
    #[must_use]
    pub fn kernel_run(&self) -> (u32, Vec<UnwindRow>) {
        if self.rows.is_empty() {
            return (0, Vec::new());
        }
        let shift = bucket_shift(&self.rows);
        let index = bucket_entries(&self.rows, shift).map(|pc| UnwindRow {
            pc,
            ..UnwindRow::default()
        });
        let run = self.rows.iter().copied().chain(index).collect();
        let rows = u32::try_from(self.rows.len()).unwrap_or(0);
        (UnwindMapping::pack_table(rows, shift), run)
    }
}

impl ElfUnwindInfo {
    /// The ELF virtual address of file offset `offset`, the start of an
    /// executable mapping: via the executable segment whose first page
    /// holds it (file offsets and addresses agree modulo the page size).
    #[must_use]
    pub fn vaddr_of_offset(&self, offset: u64) -> Option<u64> {
        const PAGE: u64 = 4096;
        self.segments
            .iter()
            .find(|s| s.file_offset & !(PAGE - 1) <= offset && offset < s.file_offset + s.file_size)
            .map(|s| (offset + s.vaddr).wrapping_sub(s.file_offset))
    }
}

#[cfg(test)]
mod tests;

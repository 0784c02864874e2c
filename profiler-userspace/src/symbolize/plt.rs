//! Names of a binary's PLT stubs, as perf and objdump give them
//! (`nanosleep@plt`).
//!
//! A stub has no symbol of its own: looked up by symbol, an address in
//! `.plt` takes the name of the nearest symbol below it, `.init`'s `_init`.
//! On x86-64 each stub is named by the GOT slot its indirect jump reads
//! (the dynamic relocation of that slot names the function), or, for a
//! lazy-binding stub that only pushes its index, by the index into
//! `.rela.plt`. Stubs that cannot be named, and every stub of another
//! architecture, stay unnamed: never another function's name.
use std::{collections::HashMap, sync::Arc};

use object::{
    Architecture, Object as _, ObjectSection as _, ObjectSymbol as _, ObjectSymbolTable as _,
    RelocationFlags, RelocationTarget, elf,
};

use crate::profile::Line;

/// The sections that hold PLT stubs: the lazy-binding `.plt`, the
/// `.plt.sec` of binaries built for IBT, and `.plt.got` (functions whose
/// address is also taken).
const SECTIONS: [&str; 3] = [".plt", ".plt.sec", ".plt.got"];

/// Size of a stub in `.plt` and `.plt.sec` on x86-64 (the psABI's).
const STUB_SIZE: u64 = 16;

/// One stub (or, unnamed, a whole PLT section): its file offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stub {
    start: u64,
    end: u64,
    name: Option<Arc<str>>,
}

/// A binary's PLT stubs, by file offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PltStubs {
    /// Sorted by `start`, not overlapping.
    stubs: Vec<Stub>,
}

impl PltStubs {
    /// The stubs of `elf`.
    pub fn read(elf: &object::File<'_>) -> Self {
        let x86_64 = elf.architecture() == Architecture::X86_64;
        let relocations = x86_64.then(|| Relocations::read(elf));
        let mut stubs = Vec::new();
        for section in SECTIONS.iter().filter_map(|name| elf.section_by_name(name)) {
            let Some((offset, size)) = section.file_range() else {
                continue;
            };
            match (&relocations, section.data()) {
                (Some(relocations), Ok(data)) => {
                    // ld aligns `.plt.got` to its stubs' size: 8, or 16 for IBT.
                    let size = match section.name() {
                        Ok(".plt.got") => section.align().clamp(8, STUB_SIZE),
                        _ => STUB_SIZE,
                    };
                    stubs.extend(named(relocations, section.address(), offset, data, size));
                }
                _ => stubs.push(Stub {
                    start: offset,
                    end: offset + size,
                    name: None,
                }),
            }
        }
        stubs.sort_by_key(|stub| stub.start);
        Self { stubs }
    }

    /// The stub that file offset `offset` is in.
    fn stub_at(&self, offset: u64) -> Option<&Stub> {
        let after = self.stubs.partition_point(|stub| stub.start <= offset);
        self.stubs[..after].last().filter(|stub| offset < stub.end)
    }

    /// `resolved` (one entry per offset of `offsets`) with the offsets in
    /// stubs named as their functions' stubs (`nanosleep@plt`), or unnamed:
    /// what the symbol table gives them is the nearest symbol below.
    pub fn name(&self, offsets: &[u64], mut resolved: Vec<Arc<[Line]>>) -> Vec<Arc<[Line]>> {
        for (&offset, lines) in offsets.iter().zip(&mut resolved) {
            if let Some(stub) = self.stub_at(offset) {
                *lines = stub.name.as_deref().map_or_else(
                    || Arc::from([]),
                    |name| {
                        Arc::from([Line {
                            function: format!("{name}@plt"),
                            file: String::new(),
                            line: 0,
                        }])
                    },
                );
            }
        }
        resolved
    }
}

/// The stubs of one PLT section at virtual address `address` and file
/// offset `offset`, `size` bytes each.
fn named<'a>(
    relocations: &'a Relocations,
    address: u64,
    offset: u64,
    data: &'a [u8],
    size: u64,
) -> impl Iterator<Item = Stub> + 'a {
    data.chunks(usize::try_from(size).unwrap_or(usize::MAX))
        .enumerate()
        .map(move |(i, code)| {
            let at = i as u64 * size;
            Stub {
                start: offset + at,
                end: offset + at + code.len() as u64,
                name: relocations.of_stub(address + at, code),
            }
        })
}

/// The dynamic relocations that name x86-64 stubs.
struct Relocations {
    /// GOT slot address → the function it holds.
    by_slot: HashMap<u64, Arc<str>>,
    /// `.rela.plt`'s functions, in order (what a lazy stub's index picks).
    jump_slots: Vec<Arc<str>>,
}

impl Relocations {
    fn read(elf: &object::File<'_>) -> Self {
        let mut by_slot = HashMap::new();
        let mut jump_slots = Vec::new();
        let symbols = elf.dynamic_symbol_table();
        for (slot, relocation) in elf.dynamic_relocations().into_iter().flatten() {
            let RelocationTarget::Symbol(index) = relocation.target() else {
                continue;
            };
            let Some(name) = symbols
                .as_ref()
                .and_then(|table| table.symbol_by_index(index).ok())
                .and_then(|symbol| symbol.name().ok())
                .filter(|name| !name.is_empty())
            else {
                continue;
            };
            let name: Arc<str> = Arc::from(name);
            let flags = relocation.flags();
            if flags
                == (RelocationFlags::Elf {
                    r_type: elf::R_X86_64_JUMP_SLOT,
                })
            {
                jump_slots.push(name.clone());
            }
            by_slot.insert(slot, name);
        }
        Self {
            by_slot,
            jump_slots,
        }
    }

    /// The function of the stub at `address` whose code is `code`: the GOT
    /// slot its `jmp *slot(%rip)` reads, or the index its `push $index`
    /// gives (after an optional `endbr64` and `bnd` prefix).
    fn of_stub(&self, address: u64, code: &[u8]) -> Option<Arc<str>> {
        let mut at = 0;
        if code.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
            at += 4;
        }
        if code.get(at) == Some(&0xf2) {
            at += 1;
        }
        let imm = |from: usize| -> Option<i32> {
            Some(i32::from_le_bytes(
                code.get(from..from + 4)?.try_into().ok()?,
            ))
        };
        match code.get(at..at + 2)? {
            [0xff, 0x25] => {
                let next = address + at as u64 + 6;
                let slot = next.checked_add_signed(i64::from(imm(at + 2)?))?;
                self.by_slot.get(&slot).cloned()
            }
            [0x68, _] => {
                let index = usize::try_from(imm(at + 1)?).ok()?;
                self.jump_slots.get(index).cloned()
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;

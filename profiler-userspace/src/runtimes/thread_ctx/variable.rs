//! Where a binary keeps `otel_thread_ctx_v1` (a TLS symbol it defines and
//! exports), and where that is in a process, for each access model the
//! specification lets a writer use:
//!
//! - in the executable (local-exec, or a reference the linker relaxed):
//!   its place in static TLS, from the file alone (`runtimes/tls.rs`);
//! - in a shared library, wherever the dynamic linker put the library's
//!   block: the library's own code finds the variable through a GOT slot
//!   that the dynamic linker fills, and so does the daemon, reading the
//!   slot from the process:
//!   - initial-exec (`R_X86_64_TPOFF64`): the offset from the thread
//!     pointer;
//!   - global dynamic (`R_X86_64_DTPMOD64`, then the `DTPOFF64` slot): the
//!     library's module id and the variable's offset in its block;
//!   - TLSDESC (`R_X86_64_TLSDESC`, recommended by the specification): a
//!     descriptor whose argument is the offset from the thread pointer
//!     when the block is in static TLS (a library loaded at start), or
//!     points at the module id and offset (glibc's `tlsdesc_dynamic_arg`)
//!     when it is not (a library loaded by `dlopen`).
use object::{
    Object as _, ObjectSymbol as _, RelocationFlags, RelocationTarget, SymbolIndex,
    elf::{R_X86_64_DTPMOD64, R_X86_64_TLSDESC, R_X86_64_TPOFF64},
};
use profiler_common::thread_ctx::ThreadCtxProcess;

use crate::{process::memory::Memory, runtimes::segments::Segments};

/// The TLS variable the specification names.
pub const SYMBOL: &str = "otel_thread_ctx_v1";

/// Module ids above this are not a dynamic linker's (a descriptor not
/// resolved yet, whose argument points elsewhere).
const MODULE_MAX: u64 = 1 << 20;

/// Where a binary keeps the variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Variable {
    /// An executable's, at this offset from the thread pointer.
    Executable(i64),
    /// A shared library's, found through the GOT slot its code reads.
    Library { segments: Segments, slot: Slot },
}

/// A library's GOT slot for the variable (its address in the file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Initial-exec: the offset from the thread pointer.
    TpOffset(u64),
    /// Global dynamic: the module id, then the offset in its block.
    Module(u64),
    /// TLSDESC: the resolver, then its argument.
    Descriptor(u64),
}

impl Variable {
    /// The variable in ELF file `data`, when it defines and exports it:
    /// as `executable` (the process's program) or as a shared library.
    #[must_use]
    pub fn of(data: &[u8], executable: bool) -> Option<Self> {
        let file = object::File::parse(data).ok()?;
        let symbol = file.dynamic_symbols().find(|s| {
            s.name() == Ok(SYMBOL) && s.kind() == object::SymbolKind::Tls && !s.is_undefined()
        })?;
        if executable {
            return crate::runtimes::tls::static_tls_offset(&file, symbol.address())
                .map(Self::Executable);
        }
        Some(Self::Library {
            segments: Segments::of(&file),
            slot: slot(&file, symbol.index())?,
        })
    }

    /// Where the variable is in process `memory`, whose mapping of the
    /// binary at file offset `offset` starts at `start`; `None` while the
    /// dynamic linker has not filled the slot yet (or it cannot be read).
    #[must_use]
    pub fn place(&self, memory: Memory, offset: u64, start: u64) -> Option<ThreadCtxProcess> {
        let (segments, slot) = match self {
            Self::Executable(tls_offset) => {
                return Some(ThreadCtxProcess {
                    tls_offset: *tls_offset,
                    module: 0,
                });
            }
            Self::Library { segments, slot } => (segments, *slot),
        };
        let bias = segments.bias(offset, start)?;
        match slot {
            Slot::TpOffset(at) => {
                let [tp_offset] = words::<1>(memory, bias.wrapping_add(at))?;
                in_static_tls(tp_offset)
            }
            Slot::Module(at) => {
                let [module, in_block] = words::<2>(memory, bias.wrapping_add(at))?;
                in_module(module, in_block)
            }
            Slot::Descriptor(at) => {
                let [_resolver, argument] = words::<2>(memory, bias.wrapping_add(at))?;
                in_static_tls(argument).or_else(|| {
                    let [module, in_block] = words::<2>(memory, argument)?;
                    in_module(module, in_block)
                })
            }
        }
    }
}

/// The GOT slot of a dynamic relocation of the library's symbol `index`
/// that its code reads the variable through.
fn slot(file: &object::File<'_>, index: SymbolIndex) -> Option<Slot> {
    file.dynamic_relocations()?.find_map(|(at, relocation)| {
        if relocation.target() != RelocationTarget::Symbol(index) {
            return None;
        }
        match relocation.flags() {
            RelocationFlags::Elf { r_type } if r_type == R_X86_64_TPOFF64 => {
                Some(Slot::TpOffset(at))
            }
            RelocationFlags::Elf { r_type } if r_type == R_X86_64_DTPMOD64 => {
                Some(Slot::Module(at))
            }
            RelocationFlags::Elf { r_type } if r_type == R_X86_64_TLSDESC => {
                Some(Slot::Descriptor(at))
            }
            _ => None,
        }
    })
}

/// A place in static TLS: below the thread pointer on x86-64, so an
/// offset that is not negative is a slot not filled yet.
fn in_static_tls(tp_offset: u64) -> Option<ThreadCtxProcess> {
    #[expect(clippy::cast_possible_wrap, reason = "the slot holds a signed offset")]
    let tls_offset = tp_offset as i64;
    (tls_offset < 0).then_some(ThreadCtxProcess {
        tls_offset,
        module: 0,
    })
}

/// A place in module `module`'s block (module ids start at 1; 0 is a slot
/// not filled yet).
fn in_module(module: u64, in_block: u64) -> Option<ThreadCtxProcess> {
    if module == 0 || module > MODULE_MAX {
        return None;
    }
    Some(ThreadCtxProcess {
        tls_offset: i64::try_from(in_block).ok()?,
        module,
    })
}

/// `N` words of process memory at `at`.
fn words<const N: usize>(memory: Memory, at: u64) -> Option<[u64; N]> {
    let mut bytes = vec![0u8; N * 8];
    memory.read(at, &mut bytes).ok()?;
    let mut out = [0u64; N];
    for (word, chunk) in out.iter_mut().zip(bytes.chunks_exact(8)) {
        *word = u64::from_le_bytes(chunk.try_into().ok()?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_not_filled_yet_places_nothing() {
        assert_eq!(
            in_static_tls(0),
            None,
            "no static TLS at the thread pointer"
        );
        assert_eq!(in_static_tls(0x7f00_1234_5000), None, "a pointer");
        assert_eq!(
            in_static_tls((-0x40_i64).cast_unsigned()),
            Some(ThreadCtxProcess {
                tls_offset: -0x40,
                module: 0
            })
        );
        assert_eq!(in_module(0, 8), None, "module ids start at 1");
        assert_eq!(
            in_module(0x5555_0000_1000, 8),
            None,
            "a descriptor's own address"
        );
        assert_eq!(in_module(u64::MAX - 1, 0), None);
        assert_eq!(
            in_module(3, 16),
            Some(ThreadCtxProcess {
                tls_offset: 16,
                module: 3
            })
        );
    }

    #[test]
    fn a_binary_without_the_variable_has_none() {
        assert_eq!(Variable::of(b"not an ELF file", false), None);
        let own = std::fs::read("/proc/self/exe").unwrap();
        assert_eq!(Variable::of(&own, true), None);
    }
}

//! Calls from the eBPF object to kernel functions (kfuncs), linked by hand
//! before aya loads the object.
//!
//! The eBPF side declares each kfunc `extern`; the compiler leaves a call
//! instruction with a relocation against the undefined symbol. libbpf
//! turns that into a kfunc call (source register `BPF_PSEUDO_KFUNC_CALL`,
//! immediate the kernel's BTF id of the function); aya 0.14 does not, and
//! refuses the object (`UnknownFunction`). So this rewrites each such
//! instruction in a copy of the object:
//!
//! - to the kfunc call, when the kernel has every kfunc of the set;
//! - otherwise to `r0 = fallback`, a value the eBPF side reads as "not
//!   done" (the programs still load, and the daemon falls back to hooks
//!   that need no kfunc).
//!
//! aya then passes the instruction over: it is no longer a BPF-to-BPF
//! call, and its relocation's symbol is in no section.
use object::{Object as _, ObjectSection as _, ObjectSymbol as _, RelocationTarget};

/// `BPF_JMP | BPF_CALL`.
const CALL: u8 = 0x85;
/// `BPF_ALU64 | BPF_MOV | BPF_K`.
const MOV64_IMM: u8 = 0xb7;
/// `BPF_PSEUDO_KFUNC_CALL` in the source register (high) nibble.
const KFUNC_CALL_REGS: u8 = 2 << 4;
const INSN_LEN: usize = 8;

/// A kfunc the eBPF side calls, and what `r0` holds in its place where the
/// kernel lacks it.
#[derive(Clone, Copy, Debug)]
pub struct Kfunc {
    pub name: &'static str,
    pub fallback: i32,
}

/// Why the object's kfunc calls could not be rewritten.
#[derive(Debug, thiserror::Error)]
pub enum KfuncError {
    #[error("parsing the eBPF object")]
    Parse(#[source] object::Error),
    #[error("a relocation against {name} at object offset {offset} is not on a call")]
    NotACall { name: &'static str, offset: usize },
}

/// A copy of the object with its kfunc calls rewritten, 8-byte aligned as
/// the ELF parser wants.
pub struct Linked {
    words: Vec<u64>,
    len: usize,
    /// Whether the calls are to the kfuncs (else to their fallbacks).
    pub kfuncs: bool,
}

impl Linked {
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `words` owns at least `len` initialised bytes (it was
        // filled from a slice of that length), u8 has no alignment or
        // validity requirement, and the borrow is tied to `self`.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }
}

/// Rewrites every call in `object` to a kfunc of `set`: to the kfuncs
/// when `id_of` knows all of them, else to their fallbacks.
///
/// # Errors
/// When `object` is not an ELF file, or a relocation against a kfunc is
/// not on a call instruction.
pub fn link(
    object: &[u8],
    set: &[Kfunc],
    id_of: impl Fn(&str) -> Option<u32>,
) -> Result<Linked, KfuncError> {
    let ids: Option<Vec<u32>> = set.iter().map(|k| id_of(k.name)).collect();
    let sites = call_sites(object, set)?;
    let mut bytes = object.to_vec();
    for (offset, index) in sites {
        let kfunc = set[index];
        let insn = &mut bytes[offset..offset + INSN_LEN];
        if insn[0] != CALL {
            return Err(KfuncError::NotACall {
                name: kfunc.name,
                offset,
            });
        }
        let (code, regs, imm) = match &ids {
            Some(ids) => (CALL, KFUNC_CALL_REGS, ids[index].cast_signed()),
            None => (MOV64_IMM, 0, kfunc.fallback),
        };
        insn[0] = code;
        insn[1] = regs;
        insn[2..4].copy_from_slice(&0u16.to_le_bytes());
        insn[4..8].copy_from_slice(&imm.to_le_bytes());
    }
    let len = bytes.len();
    let mut words = vec![0u64; len.div_ceil(8)];
    for (word, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
        let mut buf = [0u8; 8];
        buf[..chunk.len()].copy_from_slice(chunk);
        *word = u64::from_ne_bytes(buf);
    }
    Ok(Linked {
        words,
        len,
        kfuncs: ids.is_some(),
    })
}

/// File offsets of the instructions relocated against a kfunc of `set`,
/// with the kfunc's index in `set`.
fn call_sites(object: &[u8], set: &[Kfunc]) -> Result<Vec<(usize, usize)>, KfuncError> {
    let file = object::File::parse(object).map_err(KfuncError::Parse)?;
    let symbols: Vec<(object::SymbolIndex, usize)> = file
        .symbols()
        .filter(object::ObjectSymbol::is_undefined)
        .filter_map(|sym| {
            let name = sym.name().ok()?;
            Some((sym.index(), set.iter().position(|k| k.name == name)?))
        })
        .collect();
    let mut sites = Vec::new();
    for section in file.sections() {
        let Some((file_offset, _)) = section.file_range() else {
            continue;
        };
        for (offset, relocation) in section.relocations() {
            let RelocationTarget::Symbol(target) = relocation.target() else {
                continue;
            };
            if let Some(&(_, index)) = symbols.iter().find(|(s, _)| *s == target) {
                let at = usize::try_from(file_offset + offset).expect("offset in a slice");
                sites.push((at, index));
            }
        }
    }
    Ok(sites)
}

#[cfg(test)]
mod tests;

//! Every program's stack, within what Linux 6.1's verifier allows. It
//! sums the frames of each chain of BPF-to-BPF calls and callbacks
//! (`bpf_loop`'s, the task work's), each rounded up to 32 bytes, within
//! 512 bytes; 6.18 gives tracing programs private stacks and loads what 6.1
//! refuses, so the host's real-kernel tests cannot tell. Checked here
//! against the object as built, in a second, where the 6.1 VM suite takes
//! minutes: a function's frame is the deepest offset below `r10` one of
//! its instructions reads or writes, as the verifier measures it.
use std::collections::HashMap;

use object::{
    Object as _, ObjectSection as _, ObjectSymbol as _, RelocationFlags, RelocationTarget,
    SectionIndex, SectionKind, SymbolKind,
};

use super::load::EBPF_OBJECT;

/// Linux 6.1's `MAX_BPF_STACK`, for a whole chain.
const COMBINED_STACK: u32 = 512;
/// What each frame of a chain is rounded up to.
const FRAME_ROUNDING: u32 = 32;
/// The relocation of a 64-bit immediate (a map's or a callback's address).
const R_BPF_64_64: u32 = 1;
const INSN: usize = 8;
const OP_LD_IMM64: u8 = 0x18;
const OP_CALL: u8 = 0x85;
const PSEUDO_CALL: u8 = 1;
const CLASS_LDX: u8 = 1;
const CLASS_ST: u8 = 2;
const CLASS_STX: u8 = 3;
const FRAME_POINTER: u8 = 10;

/// A function of the object: its frame and the functions it calls or
/// hands to a helper as a callback, by (section, offset).
struct Function {
    name: String,
    section: SectionIndex,
    frame: u32,
    calls: Vec<(SectionIndex, u64)>,
}

/// One instruction's fields.
struct Insn {
    op: u8,
    dst: u8,
    src: u8,
    off: i16,
    imm: i32,
}

fn insn(bytes: &[u8]) -> Insn {
    Insn {
        op: bytes[0],
        dst: bytes[1] & 0xf,
        src: bytes[1] >> 4,
        off: i16::from_le_bytes([bytes[2], bytes[3]]),
        imm: i32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
    }
}

/// How far below the frame pointer `i` reaches (0: not the stack).
fn stack_reach(i: &Insn) -> u32 {
    let through_fp = match i.op & 7 {
        CLASS_LDX => i.src == FRAME_POINTER,
        CLASS_ST | CLASS_STX => i.dst == FRAME_POINTER,
        _ => false,
    };
    if through_fp && i.off < 0 {
        u32::from(i.off.unsigned_abs())
    } else {
        0
    }
}

/// Every function of the object, by (section, offset).
fn functions(file: &object::File) -> HashMap<(SectionIndex, u64), Function> {
    let mut found = HashMap::new();
    for symbol in file.symbols() {
        let Some(index) = symbol.section_index() else {
            continue;
        };
        if symbol.kind() != SymbolKind::Text || symbol.size() == 0 {
            continue;
        }
        let section = file.section_by_index(index).expect("a symbol's section");
        let code = section.data().expect("a code section's bytes");
        // Symbols' targets in this section's relocations, by offset.
        let relocations: HashMap<u64, (RelocationTarget, u32)> = section
            .relocations()
            .map(|(at, r)| {
                let RelocationFlags::Elf { r_type } = r.flags() else {
                    panic!("an ELF relocation");
                };
                (at, (r.target(), r_type))
            })
            .collect();
        // A relocated instruction's symbol (`None` inside: an extern, a
        // kfunc the loader resolves).
        let target_of = |at: u64| -> Option<Option<(SectionIndex, u64)>> {
            let (target, _) = relocations.get(&at)?;
            let RelocationTarget::Symbol(s) = target else {
                return Some(None);
            };
            let s = file.symbol_by_index(*s).ok()?;
            Some(s.section_index().map(|i| (i, s.address())))
        };
        let start = usize::try_from(symbol.address()).unwrap();
        let end = start + usize::try_from(symbol.size()).unwrap();
        let mut function = Function {
            name: symbol.name().unwrap_or("?").to_owned(),
            section: index,
            frame: 0,
            calls: Vec::new(),
        };
        let mut at = start;
        while at < end {
            let i = insn(&code[at..at + INSN]);
            let offset = at as u64;
            function.frame = function.frame.max(stack_reach(&i));
            let step = i64::from(i.imm) + 1;
            if i.op == OP_CALL && i.src == PSEUDO_CALL {
                let target = match target_of(offset) {
                    Some(Some((s, base))) => Some((s, base.wrapping_add_signed(step * 8))),
                    Some(None) => None,
                    None => Some((index, offset.wrapping_add_signed(step * 8))),
                };
                function.calls.extend(target);
            }
            if i.op == OP_LD_IMM64 {
                let callback = relocations
                    .get(&offset)
                    .is_some_and(|(_, r_type)| *r_type == R_BPF_64_64);
                if let Some((s, base)) = target_of(offset).flatten().filter(|_| callback)
                    && file.section_by_index(s).map(|s| s.kind()) == Ok(SectionKind::Text)
                {
                    function
                        .calls
                        .push((s, base + u64::from(i.imm.unsigned_abs())));
                }
                at += INSN;
            }
            at += INSN;
        }
        found.insert((index, symbol.address()), function);
    }
    found
}

/// The deepest chain from `at`: its bytes and its functions' names.
fn deepest(
    functions: &HashMap<(SectionIndex, u64), Function>,
    at: (SectionIndex, u64),
    depth: usize,
) -> (u32, Vec<String>) {
    let function = functions
        .get(&at)
        .unwrap_or_else(|| panic!("a call to {at:?}, where no function of the object starts"));
    assert!(depth < 16, "a chain of calls 16 deep at {}", function.name);
    let below = function
        .calls
        .iter()
        .map(|&callee| deepest(functions, callee, depth + 1))
        .max_by_key(|(bytes, _)| *bytes)
        .unwrap_or_default();
    let own = function.frame.max(1).next_multiple_of(FRAME_ROUNDING);
    let mut names = vec![format!("{} ({})", function.name, function.frame)];
    names.extend(below.1);
    (own + below.0, names)
}

#[test]
fn every_programs_chain_of_frames_fits_linux_6_1s_combined_stack() {
    let file = object::File::parse(EBPF_OBJECT).expect("the eBPF object parses as ELF");
    let functions = functions(&file);
    let programs: Vec<_> = functions
        .iter()
        .filter(|(_, f)| file.section_by_index(f.section).unwrap().name() != Ok(".text"))
        .map(|(&at, f)| (f.name.clone(), deepest(&functions, at, 0)))
        .collect();
    // The analysis sees the chains: sched_switch's reaches the walk's
    // iteration through the flush and its callbacks.
    let (_, (_, switch)) = programs
        .iter()
        .find(|(name, _)| name == "sched_switch")
        .expect("a sched_switch program");
    assert!(
        switch.len() >= 4 && switch.iter().any(|f| f.contains("walk_one")),
        "sched_switch's deepest chain: {switch:?}"
    );
    let over: Vec<_> = programs
        .iter()
        .filter(|(_, (bytes, _))| *bytes > COMBINED_STACK)
        .collect();
    assert!(
        over.is_empty(),
        "chains of frames over {COMBINED_STACK} bytes, which Linux 6.1 refuses to load: {over:#?}"
    );
}

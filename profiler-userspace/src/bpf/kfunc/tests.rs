//! The rewrite on the real eBPF object: every relocated call becomes the
//! kfunc call or its fallback, and nothing else in the object changes.
use super::*;
use crate::bpf::load::{EBPF_OBJECT, KFUNCS};

/// The 8 bytes at `offset` of `bytes`.
fn insn(bytes: &[u8], offset: usize) -> [u8; 8] {
    bytes[offset..offset + 8].try_into().unwrap()
}

fn imm(insn: [u8; 8]) -> i32 {
    i32::from_le_bytes(insn[4..8].try_into().unwrap())
}

#[test]
fn every_kfunc_of_the_object_is_called() {
    let sites = call_sites(EBPF_OBJECT, &KFUNCS).unwrap();
    for (index, kfunc) in KFUNCS.iter().enumerate() {
        assert!(
            sites.iter().any(|&(_, i)| i == index),
            "no call to {}",
            kfunc.name
        );
    }
    for &(offset, _) in &sites {
        assert_eq!(insn(EBPF_OBJECT, offset)[0], CALL, "as compiled");
    }
}

#[test]
fn calls_become_kfunc_calls_by_btf_id() {
    let id = |name: &str| {
        let index = KFUNCS.iter().position(|k| k.name == name)?;
        Some(1000 + u32::try_from(index).unwrap())
    };
    let linked = link(EBPF_OBJECT, &KFUNCS, id).unwrap();
    assert!(linked.kfuncs);
    let bytes = linked.bytes();
    assert_eq!(bytes.len(), EBPF_OBJECT.len());
    let sites = call_sites(EBPF_OBJECT, &KFUNCS).unwrap();
    for &(offset, index) in &sites {
        let insn = insn(bytes, offset);
        assert_eq!((insn[0], insn[1]), (CALL, KFUNC_CALL_REGS), "at {offset}");
        assert_eq!(imm(insn), 1000 + i32::try_from(index).unwrap());
    }
    let changed = (0..bytes.len()).filter(|&i| bytes[i] != EBPF_OBJECT[i]);
    for i in changed {
        assert!(
            sites.iter().any(|&(at, _)| (at..at + 8).contains(&i)),
            "byte {i} changed outside a call"
        );
    }
}

#[test]
fn without_one_kfunc_every_call_becomes_its_fallback() {
    let id = |name: &str| (name != KFUNCS[0].name).then_some(7);
    let linked = link(EBPF_OBJECT, &KFUNCS, id).unwrap();
    assert!(!linked.kfuncs);
    for (offset, index) in call_sites(EBPF_OBJECT, &KFUNCS).unwrap() {
        let insn = insn(linked.bytes(), offset);
        assert_eq!((insn[0], insn[1]), (MOV64_IMM, 0), "r0 = imm at {offset}");
        assert_eq!(imm(insn), KFUNCS[index].fallback);
    }
}

#[test]
fn a_file_that_is_not_elf_is_refused() {
    let err = link(b"not an object", &KFUNCS, |_| Some(1)).err().unwrap();
    assert_eq!(err.to_string(), "parsing the eBPF object");
}

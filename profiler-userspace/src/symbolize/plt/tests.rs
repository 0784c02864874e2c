use std::{path::Path, process::Command};

use object::{Object as _, ObjectSection as _};

use super::*;

/// Calls through the PLT, one of them (`puts`) also by its address, which
/// puts its stub in `.plt.got`.
const SOURCE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int (*volatile out)(const char *) = puts;
int main(int argc, char **argv) {
    struct timespec ts = {0, argc};
    nanosleep(&ts, &ts);
    out(getenv("HOME"));
    puts(argv[0]);
    return (int)strtol(argv[0], 0, 10);
}
"#;

/// `SOURCE` built with `cc -O2` and `flags`.
fn build(dir: &Path, name: &str, flags: &[&str]) -> std::path::PathBuf {
    let c = dir.join("prog.c");
    std::fs::write(&c, SOURCE).unwrap();
    let out = dir.join(name);
    let status = Command::new("cc")
        .arg("-O2")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&c)
        .status()
        .expect("cc (.ci/run installs it)");
    assert!(status.success());
    out
}

/// objdump's names of the stubs (BFD's synthetic `NAME@plt` symbols),
/// each with its virtual address.
fn objdump_stubs(binary: &Path) -> Vec<(u64, String)> {
    let out = Command::new("objdump")
        .args(["-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got"])
        .arg(binary)
        .output()
        .expect("objdump (binutils)");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| {
            let (address, rest) = line.split_once(" <")?;
            let name = rest.strip_suffix("@plt>:")?;
            Some((u64::from_str_radix(address, 16).ok()?, name.to_owned()))
        })
        .collect()
}

/// The name of the stub `offset` is in (`UNNAMED` if it has none).
fn lookup(stubs: &PltStubs, offset: u64) -> Option<&str> {
    stubs
        .stub_at(offset)
        .map(|stub| stub.name.as_deref().unwrap_or(UNNAMED))
}

const UNNAMED: &str = "(unnamed)";

fn section_of<'d, 'f>(elf: &'f object::File<'d>, address: u64) -> object::Section<'d, 'f> {
    elf.sections()
        .find(|s| (s.address()..s.address() + s.size()).contains(&address))
        .unwrap()
}

/// Every stub objdump names, named the same at its start and in its
/// middle; the `.plt` header and code outside the PLT are not stubs.
fn check(binary: &Path) {
    let data = std::fs::read(binary).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let stubs = PltStubs::read(&elf);
    let file_offset = |address: u64| {
        let section = section_of(&elf, address);
        address - section.address() + section.file_range().unwrap().0
    };
    let expected = objdump_stubs(binary);
    let names: Vec<&str> = expected.iter().map(|(_, name)| name.as_str()).collect();
    for function in ["nanosleep", "puts", "strtol", "getenv"] {
        assert!(names.contains(&function), "objdump names {names:?}");
    }
    for (address, name) in &expected {
        let section = section_of(&elf, *address);
        let last = if section.name() == Ok(".plt.got") {
            7
        } else {
            15
        };
        for at in [*address, address + 5, address + last] {
            assert_eq!(
                lookup(&stubs, file_offset(at)),
                Some(name.as_str()),
                "{binary:?} at {at:#x}"
            );
        }
    }
    // With `.plt.sec`, `.plt` holds the lazy-binding halves, in the same
    // order, each pushing its index (objdump leaves them unnamed).
    if let Some(sec) = elf.section_by_name(".plt.sec") {
        let plt = elf.section_by_name(".plt").unwrap().file_range().unwrap().0;
        let in_sec = expected
            .iter()
            .filter(|(address, _)| section_of(&elf, *address).name() == sec.name());
        for (i, (_, name)) in in_sec.enumerate() {
            let lazy = plt + 16 * (i as u64 + 1) + 7;
            assert_eq!(lookup(&stubs, lazy), Some(name.as_str()));
        }
    }
    let plt = elf.section_by_name(".plt").unwrap();
    assert_eq!(
        lookup(&stubs, plt.file_range().unwrap().0 + 4),
        Some(UNNAMED),
        "the header"
    );
    let main = elf
        .symbols()
        .find(|s| object::ObjectSymbol::name(s) == Ok("main"))
        .unwrap();
    let main = object::ObjectSymbol::address(&main);
    assert_eq!(lookup(&stubs, file_offset(main)), None);
}

#[test]
fn stubs_are_named_as_objdump_names_them() {
    let dir = tempfile::tempdir().unwrap();
    check(&build(dir.path(), "lazy", &[]));
    // `endbr64`-prefixed stubs in `.plt.sec` (ld makes it when every
    // input is built for IBT, or when told).
    let ibt = build(
        dir.path(),
        "ibt",
        &["-fcf-protection=full", "-Wl,-z,ibtplt"],
    );
    let data = std::fs::read(&ibt).unwrap();
    assert!(
        object::File::parse(&*data)
            .unwrap()
            .section_by_name(".plt.sec")
            .is_some()
    );
    check(&ibt);
    // Bound at start: no lazy binding, the same stubs.
    check(&build(dir.path(), "now", &["-Wl,-z,now"]));
}

#[test]
fn a_binary_without_relocations_has_unnamed_stubs_only() {
    let relocations = Relocations {
        by_slot: HashMap::new(),
        jump_slots: Vec::new(),
    };
    // jmp *0x10(%rip); push $0; jmp .plt
    let code = [
        0xff, 0x25, 0x10, 0, 0, 0, 0x68, 0, 0, 0, 0, 0xe9, 0, 0, 0, 0,
    ];
    let stubs: Vec<Stub> = named(&relocations, 0x1000, 0x1000, &code, 16).collect();
    assert_eq!(stubs.len(), 1);
    assert_eq!(stubs[0].name, None);
    let relocations = Relocations {
        by_slot: HashMap::from([(0x1016, Arc::from("f"))]),
        jump_slots: Vec::new(),
    };
    assert_eq!(relocations.of_stub(0x1000, &code).as_deref(), Some("f"));
}

/// Through the symbol cache: an address in a stub of a binary with its
/// own `.symtab` (where the symbol below it is `_init`) is named as the
/// stub.
#[test]
fn the_symbol_cache_names_a_stub_as_the_stub() {
    use crate::symbolize::{binaries, convert::BinaryKey};
    let dir = tempfile::tempdir().unwrap();
    let binary = build(dir.path(), "prog", &[]);
    let (address, _) = objdump_stubs(&binary)
        .into_iter()
        .find(|(_, name)| name == "nanosleep")
        .unwrap();
    let data = std::fs::read(&binary).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let section = section_of(&elf, address);
    let offset = address - section.address() + section.file_range().unwrap().0;
    let mut blaze = blazesym::symbolize::Symbolizer::new();
    let mut cache = binaries::Binaries::new(Vec::new(), None, None);
    let todo = binaries::Todo {
        path: binary.clone(),
        dir: None,
        offsets: vec![offset + 6],
    };
    let key = BinaryKey::File {
        path: binary.display().to_string().into(),
        id: None,
    };
    assert_eq!(cache.symbolize(&mut blaze, key.clone(), &todo, 1), (1, 0));
    let lines = cache.lines(&key, offset + 6).unwrap();
    let names: Vec<&str> = lines.iter().map(|l| l.function.as_str()).collect();
    assert_eq!(names, ["nanosleep@plt"]);
}

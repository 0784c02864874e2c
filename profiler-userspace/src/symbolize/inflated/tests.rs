use std::process::Command;

use blazesym::symbolize::{Input, Symbolized, Symbolizer, source};
use object::{Object as _, ObjectSection as _, ObjectSymbol as _};

use super::*;

const SOURCE: &str = r#"
#include <stdio.h>
__attribute__((noinline)) long inner(long n) { long s = 0; for (long i = 0; i < n; i++) s += i * i; return s; }
__attribute__((noinline)) long outer(long n) { return inner(n) + inner(n / 2); }
int main(int argc, char **argv) { printf("%ld\n", outer(argc * 1000)); return 0; }
"#;

/// A program built `cc -O2 -g`, and a copy of it with its debug sections
/// compressed as distributions ship them (`objcopy
/// --compress-debug-sections=zlib`).
struct Built {
    dir: tempfile::TempDir,
    plain: PathBuf,
    compressed: PathBuf,
}

fn built() -> Built {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("prog.c");
    fs::write(&c, SOURCE).unwrap();
    let plain = dir.path().join("prog");
    let status = Command::new("cc")
        .args(["-O2", "-g", "-o"])
        .arg(&plain)
        .arg(&c)
        .status()
        .expect("cc (.ci/run installs it)");
    assert!(status.success());
    let compressed = dir.path().join("prog.compressed");
    let status = Command::new("objcopy")
        .arg("--compress-debug-sections=zlib")
        .arg(&plain)
        .arg(&compressed)
        .status()
        .expect("objcopy (binutils)");
    assert!(status.success());
    Built {
        dir,
        plain,
        compressed,
    }
}

fn build_id(path: &Path) -> Vec<u8> {
    let data = fs::read(path).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    elf.build_id()
        .unwrap()
        .expect("cc gives a build id")
        .to_vec()
}

fn cache(dir: &Path, max_bytes: u64) -> DebugCache {
    DebugCache {
        dir: dir.join("cache"),
        max_bytes,
    }
}

/// Each section's name, flags and (inflated) contents.
fn sections(path: &Path) -> Vec<(String, u64, Vec<u8>)> {
    let data = fs::read(path).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    elf.sections()
        .map(|s| {
            let object::SectionFlags::Elf { sh_flags } = s.flags() else {
                unreachable!("an ELF file")
            };
            (
                s.name().unwrap().to_owned(),
                sh_flags,
                s.uncompressed_data().unwrap().into_owned(),
            )
        })
        .collect()
}

#[test]
fn a_copy_holds_every_section_of_the_original_inflated_and_its_bytes_in_place() {
    let built = built();
    let config = cache(built.dir.path(), 1 << 30);
    let id = build_id(&built.compressed);
    let (_held, path) = copy(&config, &built.compressed, &hex(&id))
        .unwrap()
        .expect("compressed sections are copied plain");

    let original = sections(&built.compressed);
    let copied = sections(&path);
    assert!(
        original
            .iter()
            .any(|(n, f, _)| n == ".debug_info" && f & u64::from(elf::SHF_COMPRESSED) != 0),
        "objcopy compressed nothing"
    );
    assert_eq!(copied.len(), original.len());
    for ((name, flags, data), (copy_name, copy_flags, copy_data)) in original.iter().zip(&copied) {
        assert_eq!(name, copy_name);
        assert_eq!(
            *copy_flags,
            flags & !u64::from(elf::SHF_COMPRESSED),
            "{name}"
        );
        assert!(data == copy_data, "{name}: contents differ");
    }
    assert_eq!(build_id(&path), id);
    // The original's bytes stay where they were, but for e_shoff (8 bytes
    // at 0x28), so its file offsets and program headers still hold.
    let (before, after) = (
        fs::read(&built.compressed).unwrap(),
        fs::read(&path).unwrap(),
    );
    assert_eq!(before[..0x28], after[..0x28]);
    assert_eq!(before[0x30..], after[0x30..before.len()]);
}

/// Names and lines blazesym gives for `inner` and `outer` (by their
/// addresses in `plain`'s symbol table) read from `path`.
fn named(plain: &Path, path: &Path) -> Vec<(String, Option<u32>, usize)> {
    let data = fs::read(plain).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let addresses: Vec<u64> = ["inner", "outer"]
        .iter()
        .map(|name| {
            let symbol = elf.symbols().find(|s| s.name() == Ok(name)).unwrap();
            symbol.address() + 4
        })
        .collect();
    let blaze = Symbolizer::new();
    let src = source::Source::Elf(source::Elf::new(path));
    blaze
        .symbolize(&src, Input::VirtOffset(&addresses))
        .unwrap()
        .into_iter()
        .map(|s| match s {
            Symbolized::Sym(sym) => (
                sym.name.into_owned(),
                sym.code_info.as_ref().and_then(|c| c.line),
                sym.inlined.len(),
            ),
            Symbolized::Unknown(why) => panic!("{why:?}"),
        })
        .collect()
}

#[test]
fn the_copy_names_addresses_as_the_uncompressed_program_does() {
    let built = built();
    let mut inflated = Inflated::new(cache(built.dir.path(), 1 << 30));
    let id = build_id(&built.compressed);
    let path = inflated.path_for(&built.compressed, Some(&id));
    assert!(path.starts_with("/proc/self/fd"), "{}", path.display());
    let from_copy = named(&built.plain, &path);
    assert_eq!(from_copy, named(&built.plain, &built.plain));
    assert_eq!(from_copy[0].0, "inner");
    assert!(from_copy[0].1.is_some(), "no line: {from_copy:?}");
}

#[test]
fn a_file_without_compressed_sections_or_build_id_is_read_as_it_is() {
    let built = built();
    let config = cache(built.dir.path(), 1 << 30);
    let mut inflated = Inflated::new(config.clone());
    let id = build_id(&built.plain);
    assert_eq!(inflated.path_for(&built.plain, Some(&id)), built.plain);
    assert_eq!(inflated.path_for(&built.compressed, None), built.compressed);
    assert!(!config.dir.exists(), "nothing to write");
}

#[test]
fn a_copy_is_written_once_and_then_reused() {
    use std::os::unix::fs::MetadataExt as _;
    let built = built();
    let config = cache(built.dir.path(), 1 << 30);
    let id = build_id(&built.compressed);
    let (_first, _) = copy(&config, &built.compressed, &hex(&id))
        .unwrap()
        .unwrap();
    let kept = config.dir.join(format!("{}.debug", hex(&id)));
    let inode = fs::metadata(&kept).unwrap().ino();
    let (second, _) = copy(&config, &built.compressed, &hex(&id))
        .unwrap()
        .unwrap();
    assert_eq!(second.metadata().unwrap().ino(), inode, "written again");
    let names: Vec<_> = fs::read_dir(&config.dir).unwrap().collect();
    assert_eq!(names.len(), 1, "left behind: {names:?}");
}

#[test]
fn the_budget_evicts_the_least_recently_used_copies_and_refuses_larger_ones() {
    let built = built();
    let id = build_id(&built.compressed);
    let size = Layout::of(&fs::read(&built.compressed).unwrap())
        .unwrap()
        .unwrap()
        .size;
    let small = cache(built.dir.path(), size - 1);
    assert!(
        copy(&small, &built.compressed, &hex(&id))
            .unwrap()
            .is_none(),
        "a copy larger than the budget"
    );

    let config = cache(built.dir.path(), size + size / 2);
    fs::create_dir_all(&config.dir).unwrap();
    let old = config.dir.join("old.debug");
    fs::write(&old, vec![0; usize::try_from(size / 2).unwrap()]).unwrap();
    let older = config.dir.join("older.debug");
    fs::write(&older, vec![0; 16]).unwrap();
    let long_ago = SystemTime::now() - std::time::Duration::from_hours(1);
    File::options()
        .write(true)
        .open(&older)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();
    copy(&config, &built.compressed, &hex(&id))
        .unwrap()
        .unwrap();
    assert!(!older.exists(), "the least recently used copy stays");
    assert!(old.exists(), "more evicted than the budget needs");
}

#[test]
fn a_section_that_does_not_inflate_to_its_size_leaves_no_copy() {
    let built = built();
    let mut data = fs::read(&built.compressed).unwrap();
    let layout = Layout::of(&data).unwrap().unwrap();
    // Corrupts the zlib stream of the first compressed section.
    let (_, (offset, size), _, _) = layout.compressed[0];
    let middle = usize::try_from(offset + size / 2).unwrap();
    data[middle..middle + 8].fill(0xff);
    let broken = built.dir.path().join("broken");
    fs::write(&broken, &data).unwrap();

    let config = cache(built.dir.path(), 1 << 30);
    let mut inflated = Inflated::new(config.clone());
    let id = build_id(&built.compressed);
    assert_eq!(inflated.path_for(&broken, Some(&id)), broken);
    let left: Vec<_> = fs::read_dir(&config.dir).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

//! Where a binary's function names come from, in the order gdb and perf
//! look: the binary's own `.symtab`; else a separate debug file, by build id
//! under each debug directory's `.build-id/`, then by `.gnu_debuglink`; else
//! one that debuginfod fetched; else `.dynsym`, which has exported names only.
//!
//! A separate debug file (`objcopy --only-keep-debug`) keeps the binary's
//! addresses but not its file layout, so lookups into it are by virtual
//! address, translated with the binary's own program headers.
use std::{
    fs::File,
    io,
    path::{Path, PathBuf},
    sync::Arc,
};

use object::{Object as _, ObjectSegment as _};

use super::plt::PltStubs;
use crate::process::files::hex;

/// What the symbolizer needs to know about one binary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElfFacts {
    /// Whether the binary carries its own full symbol table.
    pub has_symtab: bool,
    /// The GNU build id, raw bytes.
    pub build_id: Option<Vec<u8>>,
    /// The `.gnu_debuglink` file name and the CRC-32 of that file.
    pub debuglink: Option<(String, u32)>,
    /// Loadable segments: file offset, size in the file, virtual address.
    segments: Vec<(u64, u64, u64)>,
    /// The virtual address of the first executable loadable segment: in a
    /// debug file, whose segments keep their addresses but not their file
    /// offsets, what places a mapping of the binary's code.
    pub text_vaddr: Option<u64>,
    /// Its PLT stubs, which its symbols do not name.
    pub plt: Arc<PltStubs>,
}

impl ElfFacts {
    /// Reads the facts of the ELF file at `path`.
    ///
    /// # Errors
    /// When the file cannot be read or is not ELF.
    pub fn read(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        // Private, as every mapping the daemon makes itself (`resident.rs`).
        // SAFETY: the mapping is read-only and dropped before returning;
        // a binary truncated under us could fault, which every symbolizer
        // (blazesym included) accepts for mapped executables.
        let data = unsafe { memmap2::MmapOptions::new().map_copy_read_only(&file)? };
        let elf = object::File::parse(&*data).map_err(io::Error::other)?;
        let segments = elf
            .segments()
            .map(|segment| {
                let (offset, size) = segment.file_range();
                (offset, size, segment.address())
            })
            .collect();
        let text_vaddr = elf
            .segments()
            .find(|segment| {
                matches!(segment.flags(), object::SegmentFlags::Elf { p_flags }
                    if p_flags & object::elf::PF_X != 0)
            })
            .map(|segment| segment.address());
        Ok(Self {
            text_vaddr,
            has_symtab: elf.section_by_name(".symtab").is_some(),
            build_id: elf.build_id().ok().flatten().map(<[u8]>::to_vec),
            debuglink: elf
                .gnu_debuglink()
                .ok()
                .flatten()
                .map(|(name, crc)| (String::from_utf8_lossy(name).into_owned(), crc)),
            segments,
            plt: Arc::new(PltStubs::read(&elf)),
        })
    }

    /// The virtual address that file offset `offset` is loaded at.
    #[must_use]
    pub fn virt_offset(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(start, size, _)| (start..start + size).contains(&offset))
            .map(|&(start, _, vaddr)| offset - start + vaddr)
    }
}

/// The path of build id `id` (hex) under debug directory `dir`, as
/// distributions install it: `DIR/.build-id/xx/rest.debug`.
#[must_use]
pub fn build_id_path(dir: &Path, id: &str) -> Option<PathBuf> {
    (id.len() > 2).then(|| {
        dir.join(".build-id")
            .join(&id[..2])
            .join(format!("{}.debug", &id[2..]))
    })
}

/// Finds a local debug file for `binary`: by build id under each of
/// `debug_dirs`, then by its debug link beside the binary (`binary_dir`, as
/// the process sees it through `/proc/PID/root`), in its `.debug/`
/// subdirectory, and under each debug directory plus the binary's
/// directory. A candidate counts only if it is the binary's: the same build
/// id, or, without one, the CRC the link records.
#[must_use]
pub fn find(
    binary: &ElfFacts,
    binary_dir: Option<&Path>,
    debug_dirs: &[PathBuf],
) -> Option<PathBuf> {
    let id = binary.build_id.as_deref().map(hex);
    let by_id = id
        .iter()
        .flat_map(|id| debug_dirs.iter().filter_map(|dir| build_id_path(dir, id)));
    let by_link = binary.debuglink.iter().flat_map(|(name, _)| {
        let beside = binary_dir
            .into_iter()
            .flat_map(move |dir| [dir.join(name), dir.join(".debug").join(name)]);
        let under = debug_dirs.iter().filter_map(move |debug| {
            // `/usr/lib/debug` + `/usr/bin` → `/usr/lib/debug/usr/bin/NAME`,
            // with the `/proc/PID/root` prefix dropped.
            let dir = binary_dir?;
            let dir = strip_proc_root(dir);
            Some(debug.join(dir.strip_prefix("/").unwrap_or(dir)).join(name))
        });
        beside.chain(under)
    });
    by_id
        .chain(by_link)
        .find(|candidate| is_debug_file_of(candidate, binary))
}

/// Whether `candidate` exists and belongs to `binary`.
fn is_debug_file_of(candidate: &Path, binary: &ElfFacts) -> bool {
    if !candidate.is_file() {
        return false;
    }
    match (&binary.build_id, &binary.debuglink) {
        (Some(id), _) => ElfFacts::read(candidate).is_ok_and(|c| c.build_id.as_ref() == Some(id)),
        (None, Some((_, crc))) => {
            std::fs::read(candidate).is_ok_and(|data| crc32fast::hash(&data) == *crc)
        }
        (None, None) => false,
    }
}

/// `/proc/PID/root/usr/bin` → `/usr/bin`.
fn strip_proc_root(dir: &Path) -> &Path {
    let mut components = dir.components();
    let prefix: Vec<_> = components.by_ref().take(4).collect();
    match prefix.as_slice() {
        [root, proc, _, name]
            if root.as_os_str() == "/"
                && proc.as_os_str() == "proc"
                && name.as_os_str() == "root" =>
        {
            components.as_path()
        }
        _ => dir,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_paths_are_split_after_the_first_byte() {
        assert_eq!(
            build_id_path(Path::new("/usr/lib/debug"), "ab12cd"),
            Some(PathBuf::from("/usr/lib/debug/.build-id/ab/12cd.debug"))
        );
        assert_eq!(build_id_path(Path::new("/d"), "ab"), None);
    }

    #[test]
    fn proc_root_prefix_is_dropped() {
        assert_eq!(
            strip_proc_root(Path::new("/proc/42/root/usr/bin")),
            Path::new("usr/bin")
        );
        assert_eq!(
            strip_proc_root(Path::new("/usr/bin")),
            Path::new("/usr/bin")
        );
    }

    #[test]
    fn found_by_build_id_only_when_the_id_matches() {
        let dir = tempfile::tempdir().unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let facts = ElfFacts::read(&exe).unwrap();
        let id = hex(facts
            .build_id
            .as_deref()
            .expect("test binaries have a build id"));
        let path = build_id_path(dir.path(), &id).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let dirs = [dir.path().to_owned()];

        std::os::unix::fs::symlink("/bin/sh", &path).unwrap();
        assert_eq!(find(&facts, None, &dirs), None, "another binary's file");
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&exe, &path).unwrap();
        assert_eq!(find(&facts, None, &dirs), Some(path));
    }

    #[test]
    fn found_by_debug_link_beside_the_binary_when_the_crc_matches() {
        let dir = tempfile::tempdir().unwrap();
        let debug = dir.path().join(".debug");
        std::fs::create_dir_all(&debug).unwrap();
        std::fs::write(debug.join("prog.debug"), b"debug data").unwrap();
        let linked = |crc| ElfFacts {
            debuglink: Some(("prog.debug".to_owned(), crc)),
            ..ElfFacts::default()
        };
        let crc = crc32fast::hash(b"debug data");
        assert_eq!(
            find(&linked(crc), Some(dir.path()), &[]),
            Some(debug.join("prog.debug"))
        );
        assert_eq!(find(&linked(crc ^ 1), Some(dir.path()), &[]), None);
        assert_eq!(
            find(&linked(crc), None, &[]),
            None,
            "no directory to look in"
        );
    }

    #[test]
    fn file_offsets_translate_through_loadable_segments() {
        let facts = ElfFacts {
            segments: vec![(0, 0x1000, 0), (0x1000, 0x2000, 0x11000)],
            ..ElfFacts::default()
        };
        assert_eq!(facts.virt_offset(0x1800), Some(0x11800));
        assert_eq!(facts.virt_offset(0x10), Some(0x10));
        assert_eq!(facts.virt_offset(0x3000), None);
    }
}

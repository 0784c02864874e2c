//! Gives back the pages blazesym touched in the files it keeps mapped,
//! once a few files' batches of addresses have been looked up in them
//! (`parsed.rs` gathers them).
//!
//! blazesym maps every file it reads whole (`MAP_SHARED`, read only) and
//! keeps it mapped while the file stays parsed (`parsed.rs`). Each page a
//! lookup touched then counts in the daemon's RSS until the file is
//! dropped: under `--all`, every busy binary's debug sections at once.
//! Dropping the pages keeps what blazesym parsed (the expensive part); a
//! later lookup faults the pages it needs back in from the page cache.
//!
//! The range must be blazesym's mapping, which only this thread maps and
//! unmaps: a mapping another thread unmapped meanwhile could be memory
//! mapped anew at the same address, whose contents `MADV_DONTNEED` would
//! drop. So the daemon maps files itself only privately
//! (`map_copy_read_only`), and a shared read-only mapping of the file is
//! taken for blazesym's only when it is the process's one mapping of it.

use std::{collections::HashMap, os::unix::fs::MetadataExt as _, path::Path};

use crate::process::maps::{self, FileId, Vma};

/// Drops the resident pages of blazesym's mapping of each of `paths` that
/// is the process's only mapping of its file (so that no other thread
/// owns it, and none can unmap it meanwhile); returns the bytes of address
/// space given back. One read of `/proc/self/maps` serves them all: it
/// costs about 140 µs here with blazesym's 128 files mapped.
pub(super) fn release<P: AsRef<Path>>(paths: &[P]) -> u64 {
    let files: Vec<FileId> = paths
        .iter()
        .filter_map(|path| std::fs::metadata(path).ok())
        .map(|meta| FileId {
            dev: meta.dev(),
            inode: meta.ino(),
        })
        .collect();
    if files.is_empty() {
        return 0;
    }
    let Ok(text) = crate::process::procfs::read("/proc/self/maps") else {
        return 0;
    };
    // Each wanted file's mappings: its one shared read-only one, or none
    // to give back.
    let mut only: HashMap<FileId, Option<Vma>> = HashMap::new();
    for (vma, perms) in maps::every_mapping(&text) {
        let Some(file) = vma.file.filter(|f| files.contains(f)) else {
            continue;
        };
        only.entry(file)
            .and_modify(|one| *one = None)
            .or_insert_with(|| (perms == "r--s").then_some(vma));
    }
    only.into_values()
        .flatten()
        .map(|vma| give_back(&vma))
        .sum()
}

/// `MADV_DONTNEED` over `vma`, blazesym's only mapping of its file;
/// returns its length, or 0 if refused.
fn give_back(vma: &Vma) -> u64 {
    let (Ok(start), Ok(len)) = (
        usize::try_from(vma.start),
        usize::try_from(vma.end - vma.start),
    ) else {
        return 0;
    };
    // SAFETY: the range is one whole mapping, the only one of this file:
    // blazesym's, made on this thread when it read the file, and unmapped
    // only on this thread (when the file is evicted), so it stays this
    // mapping throughout the call. It is shared and read only, so its
    // pages are the file's page cache and nothing wrote them:
    // MADV_DONTNEED only removes them from this process's page tables, and
    // the next read maps the same bytes again. No reference into it is
    // invalidated.
    let done = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
    if done == 0 { len as u64 } else { 0 }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    /// RSS of the mapping at `start`, from `/proc/self/smaps`, in kB.
    fn resident_kb(start: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let header = format!("{start:x}-");
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&header));
        lines
            .find_map(|l| l.strip_prefix("Rss:"))
            .map(|v| v.trim().trim_end_matches(" kB").parse().unwrap())
            .unwrap()
    }

    #[test]
    fn the_only_shared_mapping_of_a_file_gives_its_pages_back_and_reads_the_same() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let bytes: Vec<u8> = (0..4 << 20).map(|i: u32| (i % 251) as u8).collect();
        file.write_all(&bytes).unwrap();
        // SAFETY: the test's own file, which nothing writes while mapped.
        let map = unsafe { memmap2::Mmap::map(file.as_file()) }.unwrap();
        let sum: u64 = map.iter().map(|&b| u64::from(b)).sum();
        let start = map.as_ptr() as usize;
        assert!(resident_kb(start) >= 4000, "touched: all resident");
        assert_eq!(release(&[file.path()]), 4 << 20);
        assert_eq!(resident_kb(start), 0);
        assert_eq!(map.iter().map(|&b| u64::from(b)).sum::<u64>(), sum);

        // A second mapping of the file: not ours to say, left alone.
        // SAFETY: as above.
        let other = unsafe { memmap2::Mmap::map(file.as_file()) }.unwrap();
        assert_eq!(release(&[file.path()]), 0);
        drop(other);
        // A private mapping (the loader's kind): left alone.
        drop(map);
        // SAFETY: as above.
        let private =
            unsafe { memmap2::MmapOptions::new().map_copy_read_only(file.as_file()) }.unwrap();
        assert_eq!(release(&[file.path()]), 0);
        drop(private);
    }

    #[test]
    fn one_read_of_the_maps_gives_back_several_files_and_skips_what_is_not_mapped() {
        let files: Vec<tempfile::NamedTempFile> = (0..3)
            .map(|_| {
                let mut file = tempfile::NamedTempFile::new().unwrap();
                file.write_all(&vec![7u8; 1 << 20]).unwrap();
                file
            })
            .collect();
        // SAFETY: the test's own files, which nothing writes while mapped.
        let maps: Vec<memmap2::Mmap> = files[..2]
            .iter()
            .map(|f| unsafe { memmap2::Mmap::map(f.as_file()) }.unwrap())
            .collect();
        for map in &maps {
            assert_eq!(map.iter().map(|&b| u64::from(b)).sum::<u64>(), 7 << 20);
            assert!(resident_kb(map.as_ptr() as usize) >= 1000);
        }
        let paths: Vec<&Path> = files.iter().map(tempfile::NamedTempFile::path).collect();
        // The third is not mapped, and a path that is gone is no file.
        let gone = Path::new("/nonexistent/gone");
        assert_eq!(release(&[paths[0], paths[1], paths[2], gone]), 2 << 20);
        for map in &maps {
            assert_eq!(resident_kb(map.as_ptr() as usize), 0);
        }
        assert_eq!(release::<&Path>(&[]), 0);
    }
}

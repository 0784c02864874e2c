//! The file a mapping saw, the one way every reader of binaries finds it
//! (symbolization, unwind tables, the runtimes' readers, build ids):
//! through the process's own view of it while it maps it
//! (`/proc/PID/map_files/`, exact even for a deleted file or one in
//! another mount namespace), and once it may be gone, through its root
//! held open or its path, checked to be the file it mapped.
use std::{
    fs::File,
    path::{Path, PathBuf},
};

use super::{
    maps::{FileId, FileStamp, Vma, map_files_path},
    roots::Root,
};

/// Opens the file `pid` maps at `vma`, while it maps it.
///
/// # Errors
/// When the mapping is gone (the process exited, exec'd or unmapped it).
pub(crate) fn open_mapped(pid: u32, vma: &Vma) -> std::io::Result<File> {
    File::open(map_files_path(pid, vma))
}

/// What is known of how a process saw a mapping's file, for finding that
/// file once the process may be gone.
pub(crate) struct Seen<'a> {
    /// Whether the process maps it now (its image is current).
    pub current: bool,
    /// Its root, held open, when it is not ours (another mount
    /// namespace, a chroot).
    pub root: Option<&'a Root>,
    /// Whether the path means the same file here (same mount namespace,
    /// or a mapping the kernel recorded, checked by build id or inode).
    pub by_path: bool,
    /// The file's stamp as the process saw it, where it was read.
    pub stamp: Option<FileStamp>,
    /// Its build id (empty for none).
    pub build_id: &'a str,
}

/// Where to read the file `pid` mapped at `vma` (and the directory it was
/// mapped from), as `seen`; `None` when it cannot be read safely.
///
/// `/proc/PID/map_files` is exact but only for the image the process runs
/// now. Otherwise the path is used through the process's root held open,
/// or as it is if the process shared our root (or the mapping was
/// recorded), if the file there is still the one mapped: the same stamp
/// through a root (for a file under an overlay, the device and inode
/// `/proc/PID/maps` shows need not be what a stat through the root reads:
/// on 6.18 they are the overlay's device and the lower file's inode), else
/// the same build id, or without one, the same device and inode.
pub(crate) fn mapped_file_path(
    pid: u32,
    vma: &Vma,
    seen: &Seen<'_>,
) -> Option<(PathBuf, Option<PathBuf>)> {
    let exact = map_files_path(pid, vma);
    if seen.current && exact.exists() {
        return Some((exact, mapped_dir(pid, vma)));
    }
    let same_build_id = |path: &Path| {
        !seen.build_id.is_empty() && build_id(path).is_some_and(|id| id == seen.build_id)
    };
    let (path, same_file) = match seen.root {
        Some(root) => {
            let path = root.path_of(&vma.path)?;
            let same = match seen.stamp {
                Some(stamp) => FileStamp::of_path(&path) == Some(stamp),
                None => same_build_id(&path),
            };
            (path, same)
        }
        None if seen.by_path => {
            let path = PathBuf::from(&*vma.path);
            let same = if seen.build_id.is_empty() {
                vma.file.is_none_or(|id: FileId| id.matches(&path))
            } else {
                same_build_id(&path)
            };
            (path, same)
        }
        None => return None,
    };
    same_file.then(|| {
        let dir = path.parent().map(Path::to_path_buf);
        (path, dir)
    })
}

/// The directory a mapped file was mapped from, as the process sees it
/// (through `/proc/PID/root`, for processes in other mount namespaces).
pub(crate) fn mapped_dir(pid: u32, vma: &Vma) -> Option<PathBuf> {
    let dir = Path::new(&*vma.path).parent()?;
    Some(PathBuf::from(format!("/proc/{pid}/root")).join(dir.strip_prefix("/").unwrap_or(dir)))
}

/// The build id (hex) of the file `pid` maps at `vma`; empty for none, and
/// for memory no file backs; `None` when the file could not be read (the
/// process is gone).
pub(crate) fn read_build_id(pid: u32, vma: &Vma) -> Option<String> {
    if !vma.is_file() {
        return Some(String::new());
    }
    let id = blazesym::helper::read_elf_build_id(&map_files_path(pid, vma)).ok()?;
    Some(id.map(|id| hex(&id)).unwrap_or_default())
}

/// The bytes at each end of a file that [`read_digest`] reads.
const DIGEST_ENDS: u64 = 4096;

/// A digest of the file `pid` maps at `vma`: its size and its first and
/// last 4 KiB, as the OpenTelemetry profiler's file ids. It tells copies
/// of a file without a build id (an image's Go program through each
/// container's mount, each its own device) from other files: a Go
/// program's own build id note is in its first page, an ELF file's
/// section headers at its end. `None` when it cannot be read.
pub(crate) fn read_digest(pid: u32, vma: &Vma) -> Option<u128> {
    digest(&open_mapped(pid, vma).ok()?)
}

/// [`read_digest`] of an open file.
fn digest(file: &File) -> Option<u128> {
    use std::os::unix::fs::FileExt as _;
    let size = file.metadata().ok()?.len();
    let head = size.min(DIGEST_ENDS);
    let tail = (size - head).min(DIGEST_ENDS);
    let mut bytes = size.to_le_bytes().to_vec();
    let start = bytes.len();
    bytes.resize(start + usize::try_from(head + tail).ok()?, 0);
    let (head_bytes, tail_bytes) = bytes[start..].split_at_mut(usize::try_from(head).ok()?);
    file.read_exact_at(head_bytes, 0).ok()?;
    file.read_exact_at(tail_bytes, size - tail).ok()?;
    Some(twox_hash::XxHash3_128::oneshot(&bytes))
}

/// The build id of the ELF file at `path`, in hex.
pub(crate) fn build_id(path: &Path) -> Option<String> {
    let id = blazesym::helper::read_elf_build_id(path).ok()??;
    Some(hex(&id))
}

/// Hex form of a build id.
#[must_use]
pub(crate) fn hex(id: &[u8]) -> String {
    use std::fmt::Write as _;
    id.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of a file has its digest; a change at either end, or of
    /// the size alone, makes another; a file smaller than both ends is
    /// read whole.
    #[test]
    fn a_digest_tells_copies_from_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let of = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            digest(&File::open(&path).unwrap()).unwrap()
        };
        let original: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let first = of("a", &original);
        assert_eq!(of("copy", &original), first);
        let mut head = original.clone();
        head[100] ^= 1;
        assert_ne!(of("head", &head), first);
        let mut tail = original.clone();
        tail[19_990] ^= 1;
        assert_ne!(of("tail", &tail), first);
        let mut longer = original.clone();
        longer.insert(10_000, 0);
        assert_ne!(of("longer", &longer), first);
        assert_ne!(of("small", b"elf"), of("smaller", b"el"));
    }
}

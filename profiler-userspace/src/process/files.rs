//! The file a mapping saw: opened through the process's own view of it
//! (`/proc/PID/map_files/`, `/proc/PID/root/`), so a deleted file or one
//! in another mount namespace is still the right one; and its build id.
use std::path::{Path, PathBuf};

use super::maps::{Vma, map_files_path};

/// The directory a mapped file was mapped from, as the process sees it
/// (through `/proc/PID/root`, for processes in other mount namespaces).
pub(crate) fn mapped_dir(pid: u32, vma: &Vma) -> Option<PathBuf> {
    let dir = Path::new(&vma.path).parent()?;
    Some(PathBuf::from(format!("/proc/{pid}/root")).join(dir.strip_prefix("/").unwrap_or(dir)))
}

/// The build id (hex) of the file `pid` maps at `vma`; empty for none, and
/// for memory no file backs.
pub(crate) fn read_build_id(pid: u32, vma: &Vma) -> String {
    if vma.is_file() {
        build_id(&map_files_path(pid, vma)).unwrap_or_default()
    } else {
        String::new()
    }
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

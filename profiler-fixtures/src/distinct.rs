//! Distinct programs made from one: copies of an ELF binary, each with a
//! GNU build id of its own, as a build host's freshly linked programs are
//! to every cache keyed by build id or by file (the memory test of
//! `distinct_binaries.rs` and the bench's section 16).
use std::{
    io,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
};

/// A GNU build id note's header: name size 4, descriptor size 20, type 3
/// (`NT_GNU_BUILD_ID`), name "GNU".
const BUILD_ID_NOTE: [u8; 16] = [4, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, b'G', b'N', b'U', 0];

/// `count` executable copies of `bin` in `dir` (`distinctNNNNN`), the
/// first 8 bytes of each one's build id its number.
///
/// # Errors
/// When `bin` cannot be read or has no GNU build id note, or a copy
/// cannot be written.
pub fn copies(bin: &Path, dir: &Path, count: usize) -> io::Result<Vec<PathBuf>> {
    let elf = std::fs::read(bin)?;
    let at = elf
        .windows(BUILD_ID_NOTE.len())
        .position(|w| w == BUILD_ID_NOTE)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: no GNU build id", bin.display()),
            )
        })?
        + BUILD_ID_NOTE.len();
    (0..count)
        .map(|i| {
            let mut copy = elf.clone();
            copy[at..at + 8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
            let path = dir.join(format!("distinct{i:05}"));
            std::fs::write(&path, copy)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
            Ok(path)
        })
        .collect()
}

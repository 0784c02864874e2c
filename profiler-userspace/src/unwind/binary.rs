//! Which file a mapping is (its identity across processes) and its bytes,
//! for building its unwind table.
use std::sync::Arc;

use super::Identified;
use crate::process::{
    build_ids::{BuildIds, FileIds},
    maps::{FileStamp, Vma},
    stamps::Stamps,
};

/// How a binary is recognised across processes: by its GNU build id where
/// it has one (the same code in every copy: a container image's libc seen
/// through each new overlay mount, a program copied), else by its digest
/// (its size and both ends: an image's Go program through each mount,
/// whose device and so stamp differ), else by its file as stamped. Two
/// ids are the same binary when their build ids, or digests, are equal,
/// whatever their stamps.
#[derive(Clone, Debug)]
pub(super) enum BinaryId {
    File {
        stamp: FileStamp,
        /// Read only without a build id.
        digest: Option<u128>,
        build_id: Option<Arc<str>>,
    },
    Vdso,
}

/// What tells binaries apart.
#[derive(PartialEq, Eq, Hash)]
enum Key<'a> {
    BuildId(&'a str),
    Digest(u128),
    Stamp(&'a FileStamp),
    Vdso,
}

impl BinaryId {
    /// What identifies the file, as the snapshots keep it (the vDSO's
    /// none: it is no file).
    fn file_ids(&self) -> FileIds {
        match self {
            Self::File {
                digest, build_id, ..
            } => FileIds {
                build_id: build_id.clone().unwrap_or_default(),
                digest: *digest,
            },
            Self::Vdso => FileIds::default(),
        }
    }

    /// The file's stamp (none for the vDSO).
    pub(super) fn stamp(&self) -> Option<FileStamp> {
        match self {
            Self::File { stamp, .. } => Some(*stamp),
            Self::Vdso => None,
        }
    }

    fn key(&self) -> Key<'_> {
        match self {
            Self::File {
                build_id: Some(id), ..
            } => Key::BuildId(id),
            Self::File {
                digest: Some(digest),
                ..
            } => Key::Digest(*digest),
            Self::File { stamp, .. } => Key::Stamp(stamp),
            Self::Vdso => Key::Vdso,
        }
    }
}

impl PartialEq for BinaryId {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for BinaryId {}

impl std::hash::Hash for BinaryId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

/// The identity of the binary behind `vma` (its stamp from `stamps`);
/// `None` for anonymous memory (JIT code) and files that cannot be
/// opened. Its build id, or without one its digest, is looked up only
/// with `build_ids` (by stamp, so once per file).
pub(super) fn binary_id(
    pid: u32,
    vma: &Vma,
    stamps: &mut Stamps,
    build_ids: Option<&mut BuildIds>,
) -> Option<BinaryId> {
    if &*vma.path == "[vdso]" {
        return Some(BinaryId::Vdso);
    }
    if !vma.is_file() {
        return None;
    }
    let stamp = stamps.of(pid, vma)?;
    let (mut build_id, mut digest) = (None, None);
    if let Some(ids) = build_ids {
        build_id = Some(ids.of(pid, vma, Some(stamp))).filter(|id| !id.is_empty());
        if build_id.is_none() {
            digest = ids.digest_of(pid, vma, stamp);
        }
    }
    Some(BinaryId::File {
        stamp,
        digest,
        build_id,
    })
}

/// Each of `vmas` with the stamp of the file behind it, its id being
/// `ids`' entry at its index (none for anonymous memory, the vDSO and
/// mappings past the kernel's limit, which `ids` stops short of).
pub(super) fn stamped<'a>(
    vmas: &'a [Vma],
    ids: &'a [Option<BinaryId>],
) -> impl Iterator<Item = (&'a Vma, Option<FileStamp>)> + 'a {
    vmas.iter()
        .enumerate()
        .map(|(i, vma)| (vma, ids.get(i).and_then(|id| id.as_ref()?.stamp())))
}

/// As [`stamped`], with the build id or digest of each mapping's file
/// where `ids` hold them (`looked_up`: the unwinder looks them up only to
/// build tables), so that the snapshots read neither again.
pub(super) fn identified<'a>(
    vmas: &'a [Vma],
    ids: &'a [Option<BinaryId>],
    looked_up: bool,
) -> impl Iterator<Item = Identified<'a>> + 'a {
    vmas.iter().enumerate().map(move |(i, vma)| {
        let id = ids.get(i).and_then(Option::as_ref);
        (
            vma,
            id.and_then(BinaryId::stamp),
            id.filter(|_| looked_up).map(BinaryId::file_ids),
        )
    })
}

/// The bytes of the binary behind `vma`: the file (through map_files, so
/// deleted and containerised files work), or for the vDSO our own copy,
/// which is the same image in every process.
pub(super) fn read_binary(pid: u32, vma: &Vma, id: &BinaryId) -> Option<Bytes> {
    match id {
        BinaryId::File { .. } => {
            let file = crate::process::files::open_mapped(pid, vma).ok()?;
            // Private, as every mapping the daemon makes itself
            // (`symbolize/resident.rs` takes shared ones for blazesym's).
            // SAFETY: the file is only read, while the table is built. A
            // binary is replaced by rename on upgrade, which leaves this
            // mapping intact; the same holds for blazesym's own mappings.
            let map = unsafe { memmap2::MmapOptions::new().map_copy_read_only(&file) }.ok()?;
            Some(Bytes::Mapped(map))
        }
        BinaryId::Vdso => own_vdso().map(Bytes::Owned),
    }
}

/// A binary's bytes: mapped, so that building a table touches only the
/// pages of its headers and CFI, not the whole file.
pub(super) enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Self::Mapped(map) => map,
            Self::Owned(bytes) => bytes,
        }
    }
}

fn own_vdso() -> Option<Vec<u8>> {
    let text = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = text.lines().find(|l| l.ends_with("[vdso]"))?;
    let (start, end) = line.split_whitespace().next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    // SAFETY: the vDSO is mapped readable in every process for its whole
    // lifetime, at the range /proc/self/maps reports.
    let image = unsafe { std::slice::from_raw_parts(start as *const u8, end - start) };
    Some(image.to_vec())
}

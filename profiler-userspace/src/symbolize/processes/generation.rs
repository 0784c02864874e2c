//! One image of a process as the symbolizer keeps it: its executable
//! mappings as pprof mappings, and how its files may be read once the
//! process is gone (by path, or through its root held open).
use std::{path::PathBuf, sync::Arc};

use crate::{
    process::{
        build_ids::FileIds,
        files::{Seen, mapped_file_path},
        maps::{FileStamp, Vma},
        recorded::RecordedImage,
        roots::{Root, Roots, Unheld},
        snapshot::{ProcessSnapshot, same_mount_ns},
    },
    profile::Mapping,
    symbolize::convert::new_mapping,
};

/// One image of a process: its executable mappings, as pprof mappings.
#[derive(Clone, Debug)]
pub(in crate::symbolize) struct Generation {
    pub vmas: Vec<(Vma, Arc<Mapping>)>,
    /// Whether its files may be read by path once it is gone: it saw
    /// files at the paths we see (same mount namespace), or its mappings
    /// came from the kernel's records, which the file at the path must
    /// match by build id or inode.
    by_path: bool,
    /// Its root, held open, when it is not ours (another mount namespace,
    /// a chroot): its files are read through it once it is gone, and then
    /// must match the stamp each had as the process saw it (`stamps`, by
    /// `vmas`' index, read through `map_files`: the device and inode of
    /// `/proc/PID/maps` need not be a stat's of the file under an overlay).
    root: Option<Arc<Root>>,
    stamps: Vec<Option<FileStamp>>,
}

impl Generation {
    /// `vmas` of `pid` with their build ids, reusing `previous`'s pprof
    /// mapping where a mapping did not change, and its root from `roots`.
    pub(super) fn read(
        pid: u32,
        vmas: Vec<Vma>,
        previous: Option<&Generation>,
        roots: &mut Roots,
    ) -> (Self, Option<Unheld>) {
        let vmas: Vec<(Vma, Arc<Mapping>)> = vmas
            .into_iter()
            .map(|vma| {
                let reused = previous.and_then(|p| {
                    p.vmas
                        .iter()
                        .find(|(old, _)| *old == vma)
                        .map(|(_, m)| m.clone())
                });
                let mapping = reused.unwrap_or_else(|| {
                    Arc::new(new_mapping(
                        &vma,
                        FileIds::read(pid, &vma).unwrap_or_default(),
                    ))
                });
                (vma, mapping)
            })
            .collect();
        let (root, unheld) = match roots.of(pid) {
            Ok(root) => (root, None),
            Err(cause) => (None, Some(cause)),
        };
        let stamps = if root.is_some() {
            vmas.iter()
                .map(|(vma, _)| {
                    vma.is_file()
                        .then(|| FileStamp::of_mapping(pid, vma))
                        .flatten()
                })
                .collect()
        } else {
            Vec::new()
        };
        let generation = Self {
            vmas,
            by_path: same_mount_ns(pid),
            root,
            stamps,
        };
        (generation, unheld)
    }

    /// The mappings of a recorded image, each with its pprof mapping
    /// carrying the build id the kernel read.
    pub(super) fn recorded(image: &RecordedImage) -> Self {
        let vmas = image
            .vmas()
            .map(|(vma, build_id)| {
                let ids = FileIds {
                    build_id,
                    digest: None,
                };
                let mapping = Arc::new(new_mapping(&vma, ids));
                (vma, mapping)
            })
            .collect();
        Self {
            vmas,
            by_path: true,
            root: None,
            stamps: Vec::new(),
        }
    }

    /// What a snapshot read while the process lived says of it.
    pub(super) fn of_snapshot(snapshot: &ProcessSnapshot) -> Self {
        let vmas = snapshot
            .vmas
            .iter()
            .map(|(vma, ids)| (vma.clone(), Arc::new(new_mapping(vma, ids.clone()))))
            .collect();
        Self {
            vmas,
            by_path: snapshot.same_mount_ns,
            root: snapshot.root.clone(),
            stamps: snapshot.stamps.clone(),
        }
    }

    /// An image with no mappings (the process was never read).
    pub(super) fn empty() -> Self {
        Self {
            vmas: Vec::new(),
            by_path: false,
            root: None,
            stamps: Vec::new(),
        }
    }

    /// Takes from `other`, an image of the same process, the build ids
    /// and the root this one lacks where it maps the same files at the
    /// same places.
    pub(super) fn fill_from(&mut self, other: &Generation) {
        fill_build_ids(self, other);
        fill_root(self, other);
    }

    /// Takes in `newer`, a read of the same mappings: readable by path if
    /// either was, and its root if this one has none.
    pub(super) fn absorb(&mut self, newer: Generation) {
        self.by_path |= newer.by_path;
        if self.root.is_none() {
            self.root = newer.root;
            self.stamps = newer.stamps;
        }
    }

    pub(super) fn same_mappings(&self, other: &Generation) -> bool {
        self.vmas.len() == other.vmas.len()
            && self.vmas.iter().zip(&other.vmas).all(|(a, b)| a.0 == b.0)
    }
}

/// Where to read the file behind `vma` of `pid`, in `generation`, and the
/// directory it was mapped from; `None` when it cannot be read safely
/// (`process::files::mapped_file_path`).
pub(in crate::symbolize) fn binary_path(
    pid: u32,
    vma: &Vma,
    mapping: &Mapping,
    generation: &Generation,
    current: bool,
) -> Option<(PathBuf, Option<PathBuf>)> {
    let stamp = generation
        .vmas
        .iter()
        .position(|(v, _)| v == vma)
        .and_then(|i| generation.stamps.get(i).copied().flatten());
    let seen = Seen {
        current,
        root: generation.root.as_deref(),
        by_path: generation.by_path,
        stamp,
        build_id: &mapping.build_id,
    };
    mapped_file_path(pid, vma, &seen)
}

/// Gives `to`, without a root (an image the kernel's records told of),
/// the root `from` was read with and its files' stamps, where `from` maps
/// the same files at the same places: the same image, read while the
/// process lived.
fn fill_root(to: &mut Generation, from: &Generation) {
    let Some(root) = from.root.as_ref().filter(|_| to.root.is_none()) else {
        return;
    };
    let same = |a: &Vma, b: &Vma| {
        (a.start, a.end, a.offset, &a.path) == (b.start, b.end, b.offset, &b.path)
    };
    let stamps: Vec<Option<FileStamp>> = to
        .vmas
        .iter()
        .map(|(vma, _)| {
            let i = from.vmas.iter().position(|(v, _)| same(v, vma))?;
            from.stamps.get(i).copied().flatten()
        })
        .collect();
    if stamps.iter().any(Option::is_some) {
        to.root = Some(root.clone());
        to.stamps = stamps;
    }
}

/// Gives the file mappings of `to` without a build id (or digest) the one
/// `from` has for the same file at the same place.
fn fill_build_ids(to: &mut Generation, from: &Generation) {
    let unknown = |m: &Mapping| m.build_id.is_empty() && m.digest.is_none();
    for (vma, mapping) in to
        .vmas
        .iter_mut()
        .filter(|(v, m)| v.is_file() && unknown(m))
    {
        let same = from.vmas.iter().find(|(v, m)| {
            !unknown(m)
                && (v.start, v.end, v.offset, &v.path)
                    == (vma.start, vma.end, vma.offset, &vma.path)
                && (v.file.is_none() || vma.file.is_none() || v.file == vma.file)
        });
        if let Some((_, known)) = same {
            *mapping = known.clone();
        }
    }
}

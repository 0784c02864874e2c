//! The pure conversions of the symbolizer: captured stacks to locations,
//! blazesym's results to lines, mappings to cache keys and pprof mappings.
use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use blazesym::symbolize::Symbolized;

use super::{
    BinaryKey, STILL_OFF_CPU, TRUNCATED,
    procmaps::{self, Vma},
};
use crate::{
    profile::{Line, Location, Mapping},
    sample::Stack,
};
/// Locations of a captured stack, leaf first; `location` maps an address and
/// its lookup address to a location.
pub(super) fn locations(
    stack: &Stack,
    side: &str,
    mut location: impl FnMut(u64, u64) -> Location,
) -> Vec<Location> {
    match stack {
        Stack::Frames(frames) => frames
            .iter()
            .zip(lookup_addrs(frames))
            .map(|(&addr, lookup)| location(addr, lookup))
            .collect(),
        Stack::Truncated(frames) => frames
            .iter()
            .zip(lookup_addrs(frames))
            .map(|(&addr, lookup)| location(addr, lookup))
            .chain([Location::marker(TRUNCATED.to_owned())])
            .collect(),
        Stack::Absent => Vec::new(),
        Stack::Named(names) => names
            .iter()
            .map(|name| Location::marker(name.clone()))
            .collect(),
        Stack::StillOffCpu => vec![Location::marker(STILL_OFF_CPU.to_owned())],
        Stack::Lost { errno } => {
            vec![Location::marker(format!(
                "[lost {side} stack: {}]",
                errno_reason(*errno)
            ))]
        }
    }
}

/// The addresses to symbolize for captured frames: every frame but the
/// leaf is a return address, which points after the call; looking up
/// `addr - 1` lands on the call itself (what perf and pprof do).
pub(super) fn lookup_addrs(frames: &[u64]) -> impl Iterator<Item = u64> + '_ {
    frames
        .iter()
        .enumerate()
        .map(|(i, &addr)| if i == 0 { addr } else { addr.saturating_sub(1) })
}

pub(super) fn find_vma(vmas: &[(Vma, Arc<Mapping>)], addr: u64) -> Option<&(Vma, Arc<Mapping>)> {
    procmaps::find(vmas, addr, |(vma, _)| vma)
}

pub(super) fn binary_key(mapping: &Mapping) -> BinaryKey {
    if mapping.build_id.is_empty() {
        BinaryKey::Path(mapping.file.clone())
    } else {
        BinaryKey::BuildId(mapping.build_id.clone())
    }
}

/// The exact file behind a mapping, even when deleted or in another mount
/// namespace.
pub(crate) fn map_files_path(pid: u32, vma: &Vma) -> PathBuf {
    PathBuf::from(format!(
        "/proc/{pid}/map_files/{:x}-{:x}",
        vma.start, vma.end
    ))
}

/// The directory a mapped file was mapped from, as the process sees it
/// (through `/proc/PID/root`, for processes in other mount namespaces).
pub(super) fn mapped_dir(pid: u32, vma: &Vma) -> Option<PathBuf> {
    let dir = Path::new(&vma.path).parent()?;
    Some(PathBuf::from(format!("/proc/{pid}/root")).join(dir.strip_prefix("/").unwrap_or(dir)))
}

/// The build id (hex) of the file `pid` maps at `vma`; empty for none, and
/// for memory no file backs.
pub(super) fn read_build_id(pid: u32, vma: &Vma) -> String {
    if vma.is_file() {
        build_id(&map_files_path(pid, vma)).unwrap_or_default()
    } else {
        String::new()
    }
}

/// `vma` as a pprof mapping of the file with `build_id`.
pub(super) fn new_mapping(vma: &Vma, build_id: String) -> Mapping {
    Mapping {
        start: vma.start,
        limit: vma.end,
        file_offset: vma.offset,
        file: vma.path.clone(),
        build_id,
    }
}

/// The build id of the ELF file at `path`, in hex.
pub(super) fn build_id(path: &Path) -> Option<String> {
    let id = blazesym::helper::read_elf_build_id(path).ok()??;
    Some(super::debug_files::hex(&id))
}

/// Frames of one symbolized address, innermost inlined function first.
pub(super) fn lines_of(result: &Symbolized<'_>) -> Arc<[Line]> {
    let Symbolized::Sym(sym) = result else {
        return Arc::new([]);
    };
    let code = |info: Option<&blazesym::symbolize::CodeInfo<'_>>| {
        info.map_or((String::new(), 0), |info| {
            (
                info.to_path().to_string_lossy().into_owned(),
                info.line.unwrap_or(0),
            )
        })
    };
    let mut lines: Vec<Line> = sym
        .inlined
        .iter()
        .rev()
        .map(|inlined| {
            let (file, line) = code(inlined.code_info.as_ref());
            Line {
                function: inlined.name.to_string(),
                file,
                line,
            }
        })
        .collect();
    let (file, line) = code(sym.code_info.as_deref());
    lines.push(Line {
        function: sym.name.to_string(),
        file,
        line,
    });
    lines.into()
}

pub(super) fn errno_reason(errno: i32) -> String {
    match errno {
        libc::E2BIG => "stack map full".to_owned(),
        // The window's maps allocate per entry; in the sampling interrupt
        // an allocation can fail.
        libc::ENOMEM => "no kernel memory for it".to_owned(),
        libc::ENOENT => "stack missing".to_owned(),
        other => format!("errno {other}"),
    }
}

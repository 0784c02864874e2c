//! The pure conversions of the symbolizer: captured stacks to locations,
//! blazesym's results to lines, mappings to cache keys and pprof mappings.
use std::sync::Arc;

use blazesym::symbolize::{Input, Symbolized, source::Source};
use profiler_common::frames::{self, UserFrame};

use super::debug_files::ElfFacts;
use crate::{
    gopclntab::GoTable,
    process::{
        build_ids::FileIds,
        maps::{self, FileId, Vma},
    },
    profile::{Line, Location, Mapping},
    sample::Stack,
};

/// Marker frame of off-CPU time whose user stack was not captured because
/// the thread was still off the CPU when the window ended.
pub const STILL_OFF_CPU: &str = "[still off-CPU at window end]";

/// Root frame of a stack cut at the frame limit.
pub const TRUNCATED: &str = "[truncated]";

/// Pseudo file name of the kernel mapping, as perf names it.
pub const KERNEL_MAPPING: &str = "[kernel.kallsyms]";

/// Identity of a binary for the symbol cache: its build id, else its
/// digest, else its path and which file was there (a path alone would
/// give one binary's names to another: a Go program, which has no GNU
/// build id, built anew and renamed over the old, or another container's
/// program at `/app`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum BinaryKey {
    BuildId(Arc<str>),
    Digest(u128),
    File { path: Arc<str>, id: Option<FileId> },
}
/// Locations of a captured stack, leaf first; `captured` maps its
/// captured frames to locations.
pub(super) fn locations(
    stack: &Stack,
    side: &str,
    mut captured: impl FnMut(&[u64]) -> Vec<Location>,
) -> Vec<Location> {
    match stack {
        Stack::Frames(frames) => captured(frames),
        Stack::Truncated(frames) => {
            let mut locations = captured(frames);
            locations.push(Location::marker(TRUNCATED.to_owned()));
            locations
        }
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

/// A user stack's frames, leaf first (see `profiler_common::python`),
/// each native one with the address to look up (as [`lookup_addrs`]).
pub(super) fn user_frames(frames: &[u64]) -> impl Iterator<Item = (UserFrame, u64)> + '_ {
    frames::user_frames(frames)
        .enumerate()
        .map(|(i, frame)| match frame {
            UserFrame::Native(addr) if i > 0 => (frame, addr.saturating_sub(1)),
            UserFrame::Native(addr) => (frame, addr),
            _ => (frame, 0),
        })
}

/// The addresses to look up of a user stack's native frames.
pub(super) fn native_lookups(frames: &[u64]) -> impl Iterator<Item = u64> + '_ {
    user_frames(frames)
        .filter_map(|(frame, lookup)| matches!(frame, UserFrame::Native(_)).then_some(lookup))
}

pub(super) fn find_vma(vmas: &[(Vma, Arc<Mapping>)], addr: u64) -> Option<&(Vma, Arc<Mapping>)> {
    maps::find(vmas, addr, |(vma, _)| vma)
}

pub(super) fn binary_key(mapping: &Mapping) -> BinaryKey {
    if !mapping.build_id.is_empty() {
        BinaryKey::BuildId(mapping.build_id.clone())
    } else if let Some(digest) = mapping.digest {
        BinaryKey::Digest(digest)
    } else {
        BinaryKey::File {
            path: mapping.file.clone(),
            id: mapping.file_id,
        }
    }
}

/// `vma` as a pprof mapping of the file with `ids`.
pub(super) fn new_mapping(vma: &Vma, ids: FileIds) -> Mapping {
    Mapping {
        start: vma.start,
        limit: vma.end,
        file_offset: vma.offset,
        file: vma.path.clone(),
        build_id: ids.build_id,
        digest: ids.digest,
        file_id: vma.file,
    }
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

/// Symbolizes `input` in `source`: one entry per address, empty where it
/// did not resolve (or the whole source failed).
pub(super) fn symbolize(
    blaze: &blazesym::symbolize::Symbolizer,
    source: &Source<'_>,
    input: Input<&[u64]>,
) -> Vec<Arc<[Line]>> {
    let count = match input {
        Input::AbsAddr(a) | Input::VirtOffset(a) | Input::FileOffset(a) => a.len(),
    };
    match blaze.symbolize(source, input) {
        Ok(results) => results
            .into_iter()
            .map(|result| lines_of(&result))
            .collect(),
        Err(e) => {
            tracing::debug!("symbolization failed: {e}");
            vec![Arc::from([]); count]
        }
    }
}

/// Names file offsets of a stripped Go binary from its `.gopclntab`.
pub(super) fn go_lines(table: &GoTable, facts: &ElfFacts, offsets: &[u64]) -> Vec<Arc<[Line]>> {
    offsets
        .iter()
        .map(|&offset| {
            let frames = facts
                .virt_offset(offset)
                .and_then(|address| table.frames(address))
                .unwrap_or_default();
            frames
                .into_iter()
                .map(|frame| Line {
                    function: frame.function,
                    file: frame.file,
                    line: frame.line,
                })
                .collect()
        })
        .collect()
}

//! The kernel's records, as the events [`Images`](super::images::Images)
//! follows: read with `perf-event-data`, each parsed once, with the time it
//! happened.
use perf_event::data::{
    self, RecordMetadata, Visitor,
    endian::Native,
    parse::{ParseConfig, Parser},
};
use perf_event_open_sys::bindings::perf_event_header;
use std::sync::Arc;

use super::images::{Event, NewMapping};
use crate::{
    process::{files::hex, maps::FileId, recorded::MappedFile},
    sample::KernelSymbol,
};

/// `PERF_RECORD_MISC_COMM_EXEC`: the name change is an exec's.
const MISC_COMM_EXEC: u16 = 1 << 13;

/// `PROT_EXEC` in an mmap record's `prot`.
const PROT_EXEC: u32 = 0x4;

/// What one record means, when it matters here.
pub(super) enum Parsed {
    /// An event, at its time (perf's clock, ns: for ordering only).
    Event(u64, Event),
    /// Kernel code loaded (a BPF program), at its time.
    KernelSymbol(u64, KernelSymbol),
    /// The kernel lost this many records: its ring was full.
    Lost(u64),
    /// A record of no interest (a thread's exit or clone, a rename, a
    /// non-executable mapping, kernel code unloaded, a BPF program's load
    /// event: its ksymbol record is the one read).
    Other,
}

/// Reads `record`, from a ring whose event is `config`, in one parse of
/// its body and `sample_id`; `None` when it does not parse.
pub(super) fn parse(
    record: &perf_event::Record<'_>,
    config: &ParseConfig<Native>,
) -> Option<Parsed> {
    let body = record.to_contiguous();
    let header = perf_event_header {
        type_: record.ty(),
        misc: record.misc(),
        size: u16::try_from(body.len() + size_of::<perf_event_header>()).ok()?,
    };
    let mut parser = Parser::new(&*body, config.clone());
    parser.parse_record_with_header(Interest, header).ok()?
}

/// Turns each record into what it means here, with its time.
struct Interest;

impl<'a> Visitor<'a> for Interest {
    type Output = Option<Parsed>;

    /// A record of no interest.
    fn visit_unimplemented(self, _: RecordMetadata) -> Option<Parsed> {
        Some(Parsed::Other)
    }

    fn visit_lost(self, lost: data::Lost, _: RecordMetadata) -> Option<Parsed> {
        Some(Parsed::Lost(lost.lost))
    }

    fn visit_ksymbol(self, symbol: data::KSymbol<'a>, metadata: RecordMetadata) -> Option<Parsed> {
        if symbol.flags.contains(data::KSymbolFlags::UNREGISTER) {
            return Some(Parsed::Other);
        }
        let symbol = KernelSymbol {
            // Numbered in the order the rings are merged.
            seq: 0,
            start: symbol.addr,
            len: symbol.len,
            name: String::from_utf8_lossy(&symbol.name).into(),
        };
        Some(Parsed::KernelSymbol(time(&metadata)?, symbol))
    }

    fn visit_fork(self, fork: data::Fork, metadata: RecordMetadata) -> Option<Parsed> {
        if fork.pid == fork.ppid {
            return Some(Parsed::Other);
        }
        let event = Event::Fork {
            pid: fork.pid,
            parent: fork.ppid,
        };
        Some(Parsed::Event(time(&metadata)?, event))
    }

    fn visit_exit(self, exit: data::Exit, metadata: RecordMetadata) -> Option<Parsed> {
        if exit.pid != exit.tid {
            return Some(Parsed::Other);
        }
        Some(Parsed::Event(
            time(&metadata)?,
            Event::Exit { pid: exit.pid },
        ))
    }

    fn visit_comm(self, comm: data::Comm<'a>, metadata: RecordMetadata) -> Option<Parsed> {
        if metadata.misc() & MISC_COMM_EXEC == 0 {
            return Some(Parsed::Other);
        }
        let event = Event::Exec {
            pid: comm.pid,
            comm: String::from_utf8_lossy(&comm.comm).into(),
        };
        Some(Parsed::Event(time(&metadata)?, event))
    }

    fn visit_mmap2(self, mmap: data::Mmap2<'a>, metadata: RecordMetadata) -> Option<Parsed> {
        if mmap.prot & PROT_EXEC == 0 {
            return Some(Parsed::Other);
        }
        let event = Event::Mmap {
            pid: mmap.pid,
            mapping: NewMapping {
                start: mmap.addr,
                end: mmap.addr.saturating_add(mmap.len),
                offset: mmap.pgoff,
                file: mapped_file(&mmap),
            },
        };
        Some(Parsed::Event(time(&metadata)?, event))
    }
}

/// The record's time from its `sample_id`, as the events ask for.
fn time(metadata: &RecordMetadata) -> Option<u64> {
    metadata.sample_id().time()
}

/// The file behind an mmap record: its path, and its build id or, where
/// the kernel read none, its device and inode.
fn mapped_file(mmap: &data::Mmap2<'_>) -> MappedFile {
    let path = String::from_utf8_lossy(&mmap.filename);
    let build_id = mmap
        .build_id()
        .filter(|id| !id.is_empty())
        .map(|id| Arc::from(hex(id)));
    let id = match (mmap.maj(), mmap.min(), mmap.ino()) {
        (Some(major), Some(minor), Some(inode)) => FileId::new(major, minor, inode),
        _ => None,
    };
    MappedFile {
        path: Arc::from(path.strip_suffix(" (deleted)").unwrap_or(&path)),
        build_id,
        id,
    }
}

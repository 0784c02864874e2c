//! The kernel's records, as the events [`Images`](super::images::Images)
//! follows: read with `perf-event-data`, each with the time it happened.
use perf_event::data::{
    self, RecordMetadata,
    endian::Native,
    parse::{ParseConfig, Parser},
};

use super::images::{Event, NewMapping};
use crate::{
    process::{files::hex, maps::FileId, recorded::MappedFile},
    symbolize::KernelSymbol,
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

/// Reads `record`, from a ring whose event is `config`; `None` when it
/// does not parse.
pub(super) fn parse(
    record: &perf_event::Record<'_>,
    config: &ParseConfig<Native>,
) -> Option<Parsed> {
    let body = record.parse_record().ok()?;
    let time = || metadata(record, config).and_then(|m| m.sample_id().time());
    let event = match body {
        data::Record::Lost(lost) => return Some(Parsed::Lost(lost.lost)),
        data::Record::KSymbol(symbol) if !symbol.flags.contains(data::KSymbolFlags::UNREGISTER) => {
            let symbol = KernelSymbol {
                // Numbered in the order the rings are merged.
                seq: 0,
                start: symbol.addr,
                len: symbol.len,
                name: String::from_utf8_lossy(&symbol.name).into(),
            };
            return Some(Parsed::KernelSymbol(time()?, symbol));
        }
        data::Record::Fork(fork) if fork.pid != fork.ppid => Event::Fork {
            pid: fork.pid,
            parent: fork.ppid,
        },
        data::Record::Exit(exit) if exit.pid == exit.tid => Event::Exit { pid: exit.pid },
        data::Record::Comm(comm) if record.misc() & MISC_COMM_EXEC != 0 => Event::Exec {
            pid: comm.pid,
            comm: String::from_utf8_lossy(&comm.comm).into(),
        },
        data::Record::Mmap2(mmap) if mmap.prot & PROT_EXEC != 0 => Event::Mmap {
            pid: mmap.pid,
            mapping: NewMapping {
                start: mmap.addr,
                end: mmap.addr.saturating_add(mmap.len),
                offset: mmap.pgoff,
                file: mapped_file(&mmap),
            },
        },
        _ => return Some(Parsed::Other),
    };
    Some(Parsed::Event(time()?, event))
}

/// The file behind an mmap record: its path, and its build id or, where
/// the kernel read none, its device and inode.
fn mapped_file(mmap: &data::Mmap2<'_>) -> MappedFile {
    let path = String::from_utf8_lossy(&mmap.filename);
    let build_id = mmap.build_id().filter(|id| !id.is_empty()).map(hex);
    let id = match (mmap.maj(), mmap.min(), mmap.ino()) {
        (Some(major), Some(minor), Some(inode)) => FileId::new(major, minor, inode),
        _ => None,
    };
    MappedFile {
        path: path.strip_suffix(" (deleted)").unwrap_or(&path).to_owned(),
        build_id,
        id,
    }
}

/// The record's `sample_id` (pid, tid and time, as the events ask for).
fn metadata(
    record: &perf_event::Record<'_>,
    config: &ParseConfig<Native>,
) -> Option<RecordMetadata> {
    // The parser reads the header too: put it back in front of the body.
    let body = record.to_contiguous();
    let size = u16::try_from(body.len() + 8).ok()?;
    let mut bytes = Vec::with_capacity(body.len() + 8);
    bytes.extend_from_slice(&record.ty().to_ne_bytes());
    bytes.extend_from_slice(&record.misc().to_ne_bytes());
    bytes.extend_from_slice(&size.to_ne_bytes());
    bytes.extend_from_slice(&body);
    let mut parser = Parser::new(&bytes[..], config.clone());
    let (_, metadata) = parser.parse_metadata().ok()?;
    Some(metadata)
}

//! Mappings as the kernel makes them, for processes that live too briefly
//! to be read from `/proc`: perf's own records, as `perf record` takes
//! them. A software event that counts nothing (`PERF_COUNT_SW_DUMMY`) on
//! every CPU asks the kernel to write a record at each executable mmap
//! (`PERF_RECORD_MMAP2`, with the file's build id since 5.12), exec,
//! fork and exit of every process into a ring per CPU. The daemon reads
//! the rings with its other chores (every 200 ms) and at each chunk's
//! end, orders the records by time (a process moves between CPUs), and
//! follows each process's image (`images.rs`). An image that ended goes
//! with the next chunk to the symbolizer, which uses it for processes
//! that have samples and are gone. The same rings carry the kernel's
//! records of BPF programs loaded (`PERF_RECORD_KSYMBOL`),
//! which go with the next chunk too, to name kernel frames in code loaded
//! after kallsyms was read (`symbolize/kernel_symbols.rs`).
//!
//! The kernel's cost is a record per executable mmap, exec, fork and exit
//! (and reading the build id from the mapped file's first page), and per
//! BPF program loaded or unloaded; nothing on any other path.
mod images;
mod records;

use std::{io, sync::Arc};

use perf_event::{Builder, SampleFlag, Sampler, events::Software};
use thiserror::Error;

use images::{Images, Running};
use records::Parsed;

use crate::{
    process::{
        maps,
        recorded::{RecordStats, RecordedImage},
    },
    sample::KernelSymbol,
};

/// Ring size per CPU: 512 KiB holds some 4000 records, 4 s of a thousand
/// short processes a second (an exec, a fork, an exit and about three
/// mmaps each) between two reads 200 ms apart.
const RING_BYTES: usize = 512 << 10;

#[derive(Debug, Error)]
pub enum MappingEventsError {
    #[error("reading the online CPUs from {path}")]
    Cpus {
        path: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("opening the mmap record event on CPU {cpu}")]
    Open {
        cpu: u32,
        #[source]
        source: io::Error,
    },
}

/// What the rings told since the last take, for the next chunk.
#[derive(Debug, Default)]
pub struct Recorded {
    /// Images that ended.
    pub images: Vec<Arc<RecordedImage>>,
    /// Kernel code loaded, oldest first.
    pub kernel_symbols: Vec<KernelSymbol>,
    pub stats: RecordStats,
}

/// The record rings and the images they tell of.
pub struct MappingEvents {
    rings: Vec<Sampler>,
    images: Images,
    /// Kernel symbols since the last take, oldest first.
    kernel_symbols: Vec<KernelSymbol>,
    /// Kernel symbols read so far (their `seq`).
    kernel_symbols_read: u64,
    /// Lost and unreadable records since the last take.
    stats: RecordStats,
}

impl MappingEvents {
    /// Opens a record ring on every online CPU: for kernel symbols, and
    /// for mappings too with `mappings` (to follow every process's images,
    /// which only `--all` and `--comm` need).
    ///
    /// # Errors
    /// When the CPUs cannot be read or an event cannot be opened.
    pub fn open(mappings: bool) -> Result<Self, MappingEventsError> {
        let cpus = aya::util::online_cpus()
            .map_err(|(path, source)| MappingEventsError::Cpus { path, source })?;
        let rings = cpus
            .into_iter()
            .map(|cpu| {
                open_ring(cpu, mappings, true)
                    .or_else(|_| open_ring(cpu, mappings, false))
                    .map_err(|source| MappingEventsError::Open { cpu, source })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            rings,
            images: Images::default(),
            kernel_symbols: Vec::new(),
            kernel_symbols_read: 0,
            stats: RecordStats::default(),
        })
    }

    /// Reads every ring and follows what it holds.
    pub fn read(&mut self) {
        let mut events = Vec::new();
        let mut symbols = Vec::new();
        for ring in &mut self.rings {
            let config = ring.config().clone();
            while let Some(record) = ring.next_record() {
                match records::parse(&record, &config) {
                    Some(Parsed::Event(time, event)) => events.push((time, event)),
                    Some(Parsed::KernelSymbol(time, symbol)) => symbols.push((time, symbol)),
                    Some(Parsed::Lost(n)) => self.stats.lost += n,
                    Some(Parsed::Other) => {}
                    None => self.stats.unreadable += 1,
                }
            }
        }
        // Stable: records of one CPU with one time keep their order.
        events.sort_by_key(|&(time, _)| time);
        symbols.sort_by_key(|&(time, _)| time);
        for (_, mut symbol) in symbols {
            self.kernel_symbols_read += 1;
            symbol.seq = self.kernel_symbols_read;
            self.kernel_symbols.push(symbol);
        }
        let mut read_proc = |pid: u32| {
            let vmas = maps::read(pid).ok()?;
            let comm = crate::process::procfs::comm(pid, pid).map(Arc::from);
            Some(Running { comm, vmas })
        };
        for (_, event) in events {
            self.images.apply(event, &mut read_proc);
        }
    }

    /// What the rings told since the last call (reading them first): the
    /// images that ended, the kernel symbols, and the counts.
    pub fn take(&mut self) -> Recorded {
        self.read();
        let (images, mut stats) = self.images.take_ended();
        stats.add(&std::mem::take(&mut self.stats));
        Recorded {
            images,
            kernel_symbols: std::mem::take(&mut self.kernel_symbols),
            stats,
        }
    }
}

/// The dummy event on `cpu`, for every process, writing the records of
/// kernel symbols (5.1 and later) into a ring, and with `mappings` those
/// of executable mmaps (with build ids, when `build_id`: 5.12 and later),
/// execs, forks and exits.
fn open_ring(cpu: u32, mappings: bool, build_id: bool) -> io::Result<Sampler> {
    let mut builder = Builder::new(Software::DUMMY);
    builder
        .one_cpu(cpu as usize)
        .any_pid()
        .mmap(mappings)
        .mmap2(mappings)
        .build_id(mappings && build_id)
        .comm(mappings)
        .comm_exec(mappings)
        .task(mappings)
        .ksymbol(true)
        .sample_id_all(true)
        .sample(SampleFlag::TID | SampleFlag::TIME)
        .enabled(true);
    builder.build()?.sampled(RING_BYTES)
}

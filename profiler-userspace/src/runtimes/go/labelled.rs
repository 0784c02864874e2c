//! The Go processes whose threads' samples carry the pprof labels of the
//! goroutine they ran: published to the kernel (`GO_PROCS`) when the
//! unwinder reads a process's mappings, as Python processes and JVMs are,
//! and the label sets the samples recorded read while the process runs.
use std::{
    collections::{HashMap, HashSet},
    path::Path,
    sync::Arc,
};

use profiler_common::go::GoProcess;

use super::{
    labels::{LabelSets, SetCounts},
    runtime::GoRuntime,
};
use crate::{
    bpf::{GoMaps, KernelError},
    process::maps::FileStamp,
    process::memory::Memory,
    runtimes::file_memo::FileMemo,
    sample::{RawSample, RowLabels},
    unwind::Stamped,
};

/// The daemon's side of the samples' Go labels, and with
/// `--goroutine-wakers` the probes on the binaries' `runtime.ready`.
#[derive(Default)]
pub struct GoLabels {
    /// Whether each Go binary's `runtime.ready` is probed.
    wakers: bool,
    /// The binaries probed, by file (device and inode).
    probed: HashSet<(u64, u64)>,
    probe_failures: u32,
    /// Go runtimes by file, read once (`None`: not Go, or not readable
    /// as Go).
    binaries: FileMemo<Option<Arc<GoRuntime>>>,
    /// The label sets of each process published.
    processes: HashMap<u32, LabelSets>,
    /// The counts of processes forgotten.
    ended: SetCounts,
}

/// The most Go binaries probed: a probe stays until the daemon exits.
const MAX_PROBED: usize = profiler_common::maps::GO_BINARIES_MAX_ENTRIES as usize;
/// Probes that may fail before no more are tried.
const MAX_PROBE_FAILURES: u32 = 64;

impl GoLabels {
    /// With `wakers`, each Go binary's `runtime.ready` is probed as its
    /// first process is published.
    #[must_use]
    pub fn new(wakers: bool) -> Self {
        Self {
            wakers,
            ..Self::default()
        }
    }

    /// Publishes `pid` as a Go process if one of its `mappings` is a Go
    /// binary whose layout is known, and forgets it otherwise (it exec'd
    /// into something else).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn publish(
        &mut self,
        maps: &mut impl GoMaps,
        pid: u32,
        mappings: &Stamped<'_>,
    ) -> Result<bool, KernelError> {
        let found = mappings
            .iter()
            .find_map(|&(vma, stamp)| Some((self.runtime(pid, vma, stamp?)?, vma, stamp?)));
        let Some((runtime, vma, stamp)) = found else {
            return self.forget(maps, pid).map(|()| false);
        };
        let layout = runtime.layout;
        let offset = |at: u64| u32::try_from(at).unwrap_or(0);
        let process = GoProcess {
            tls_g: runtime.tls_g,
            g_m: offset(layout.m),
            m_curg: offset(layout.m_curg),
            g_labels: offset(layout.labels),
            form: runtime.labels.kernel(),
            g_goid: offset(layout.goid),
            g_sched_bp: offset(layout.sched_bp),
        };
        // The samples record their goroutine only for the critical path
        // through goroutines, which needs the wakers.
        let published = GoProcess {
            g_goid: if self.wakers { process.g_goid } else { 0 },
            ..process
        };
        maps.set_go(pid, &published)?;
        if let Some(ready) = runtime.ready_offset {
            let file = crate::process::maps::map_files_path(pid, vma);
            self.probe(maps, pid, (stamp.dev, stamp.ino), (&file, ready, &process));
        }
        let sets = LabelSets::new(runtime.labels, Memory { pid });
        if let Some(old) = self.processes.insert(pid, sets) {
            self.ended.add(old.counts);
        }
        Ok(true)
    }

    /// Probes `runtime.ready` in the binary `id` of `pid`, at `path`
    /// (its mapping in `/proc`) and file offset `ready`, unless probed
    /// already. A probe that fails (the process exited meanwhile) is tried
    /// again with the binary's next process, up to [`MAX_PROBE_FAILURES`]
    /// failures in all.
    fn probe(
        &mut self,
        maps: &mut impl GoMaps,
        pid: u32,
        id: (u64, u64),
        (path, ready, binary): (&Path, u64, &GoProcess),
    ) {
        if self.probed.contains(&id) || self.probe_failures >= MAX_PROBE_FAILURES {
            return;
        }
        if self.probed.len() >= MAX_PROBED {
            log::debug!("pid {pid}: not probed for goroutine wakers: {MAX_PROBED} binaries are");
            return;
        }
        match maps.probe_ready(path, ready, binary) {
            Ok(()) => {
                self.probed.insert(id);
            }
            Err(e) => {
                self.probe_failures += 1;
                let last = self.probe_failures == MAX_PROBE_FAILURES;
                let why = crate::error_chain(&e);
                if last {
                    log::warn!("pid {pid}: no goroutine wakers from now on: {why}");
                } else {
                    log::debug!("pid {pid}: no goroutine wakers yet: {why}");
                }
            }
        }
    }

    /// Forgets `pid` (exited, or no longer Go).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn forget(&mut self, maps: &mut impl GoMaps, pid: u32) -> Result<(), KernelError> {
        if let Some(sets) = self.processes.remove(&pid) {
            self.ended.add(sets.counts);
            maps.remove_go(pid)?;
        }
        Ok(())
    }

    /// Reads the label sets the samples asked for, at once (the set most
    /// likely still lives).
    ///
    /// # Errors
    /// When the kernel map cannot be read.
    pub fn serve(&mut self, maps: &mut impl GoMaps) -> Result<(), KernelError> {
        for seen in maps.take_label_requests()? {
            if let Some(sets) = self.processes.get_mut(&seen.pid) {
                sets.of_checked(seen.address, seen.identity);
            }
        }
        Ok(())
    }

    /// The label sets that left samples unlabelled, since start.
    #[must_use]
    pub fn set_counts(&self) -> SetCounts {
        let mut counts = self.ended;
        for sets in self.processes.values() {
            counts.add(sets.counts);
        }
        counts
    }

    /// Reads the label sets `samples` recorded into their labels, while
    /// their processes run.
    pub fn label(&mut self, samples: &mut [RawSample]) {
        for sample in samples {
            let Some(at) = sample.label_set.take() else {
                continue;
            };
            let Some(sets) = self.processes.get_mut(&sample.pid) else {
                continue;
            };
            let set = sets.of_checked(at.address, at.identity);
            if set.is_empty() {
                continue;
            }
            let mut labels = sample
                .labels
                .as_ref()
                .map(|l| l.labels.clone())
                .unwrap_or_default();
            labels.extend(set.iter().cloned());
            sample.labels = Some(Arc::new(RowLabels {
                replaces_thread: false,
                labels,
            }));
        }
    }

    /// Files remembered (whether Go or not).
    #[must_use]
    pub fn binaries_cached(&self) -> usize {
        self.binaries.len()
    }

    /// Whether a process of the file `stamp` may wait to be read (see
    /// `unwind/waiting.rs`): the file was read, Go or not. A Go process's
    /// labels are set by its goroutines as it serves, so one read 100 ms
    /// after its start misses only its first samples' labels, while
    /// reading each at once (a build's Go tools, a script's `gofmt`) cost
    /// its maps and publication, most of them for a process gone by then.
    #[must_use]
    pub fn lets_wait(&self, stamp: &FileStamp) -> bool {
        self.binaries.has(stamp)
    }

    /// The Go runtime of the file `vma` of `pid` maps, read once per file.
    fn runtime(
        &mut self,
        pid: u32,
        vma: &crate::process::maps::Vma,
        stamp: FileStamp,
    ) -> Option<Arc<GoRuntime>> {
        let wakers = self.wakers;
        self.binaries
            .get_or_map(pid, vma, stamp, |data| {
                GoRuntime::of_data(data)
                    .ok()
                    .flatten()
                    .filter(|r| r.layout.labels != 0 && r.layout.m_curg != 0)
                    .map(|r| if wakers { r.find_ready(data) } else { r })
                    .map(Arc::new)
            })
            .flatten()
    }
}

//! Reads processes' mappings while they live. The kernel asks for a
//! process when it first samples it (no mappings published for it) and
//! when it execs (`UNWIND_REQUESTS`), and rings the daemon; at once, the
//! unwinder reads `/proc/PID/maps` for each, a [`ProcessSnapshot`] of
//! the same mappings, with their build ids and the process's root, is
//! kept for the symbolizer (`snapshots.rs`), and then the unwinder builds
//! and publishes tables (without tables under `--unwind frame-pointer`).
//! A process that starts and exits within a window is symbolized from
//! its snapshot.
//!
//! Processes that come and go faster than that (under `--all` and
//! `--comm`) are followed from the kernel's mmap records
//! (`mapping_events/`), whose ended images go with each chunk too, as do
//! the kernel's records of BPF programs loaded (always).
//!
//! The same reads publish Python processes and JVMs to the kernel walk
//! (`runtimes/python/`, `runtimes/java/`), and Go processes to the on-CPU
//! sample, which records their goroutines' pprof labels (read here into
//! each chunk's rows: `runtimes/go/labelled.rs`), and processes that
//! publish OpenTelemetry's thread context (`runtimes/thread_ctx/`); the
//! walk's requests for
//! Python code objects are served here too: the code objects read go with
//! each chunk, as do the chunk's Java frames, named here while their JVMs
//! run.
use std::sync::Arc;

use profiler_common::process::ProcessSeen;

use crate::{
    bpf::{GoMaps, JavaMaps, KernelError, PythonMaps, Rang, ThreadCtxMaps, UnwindMaps},
    config::{Target, Unwind},
    cpu_time::{Step, timed},
    mapping_events::{MappingEvents, Recorded},
    process::snapshot::{Known, ProcessSnapshot},
    runtimes::{
        go::GoLabels,
        java::{Java, NamedFrame},
        python::{Python, PythonCode},
        thread_ctx::ThreadContexts,
    },
    sample::RawSample,
    unwind::{Fresh, Published, Served, Stamped, Unwinder},
};

mod snapshots;

use snapshots::{snapshot_all, snapshotter};

/// The maps the watch writes.
pub trait WatchMaps:
    UnwindMaps<Error = KernelError> + PythonMaps + JavaMaps + GoMaps + ThreadCtxMaps
{
}

impl<T> WatchMaps for T where
    T: UnwindMaps<Error = KernelError> + PythonMaps + JavaMaps + GoMaps + ThreadCtxMaps
{
}

pub struct ProcessWatch {
    unwinder: Unwinder,
    /// What is done with each process whose mappings were read anew.
    anew: Anew,
    /// The kernel's mmap records, when targets can appear at any time.
    events: Option<MappingEvents>,
}

/// What is made of a process's mappings read anew: its publication as a
/// Python process or a JVM (or neither), as soon as they are published,
/// and a snapshot.
#[derive(Default)]
struct Anew {
    /// Snapshots taken since the last [`ProcessWatch::take_snapshots`].
    snapshots: Vec<Arc<ProcessSnapshot>>,
    /// The build ids of the files mapped, the roots of processes not in
    /// ours (held open) and the placements, for the snapshots.
    known: Known,
    walked: Walked,
}

/// The runtimes whose frames the kernel walk records.
#[derive(Default)]
struct Walked {
    python: Python,
    java: Java,
    go: GoLabels,
    thread_ctx: ThreadContexts,
}

impl Walked {
    /// Publishes (or forgets) process `pid` as each runtime's; which of
    /// its mappings' files every runtime has read and found none of its
    /// own (not merely unread, or unreadable as the process exited), or
    /// none that cannot wait (Go's labels: [`GoLabels::lets_wait`]).
    fn publish(
        &mut self,
        kernel: &mut impl WatchMaps,
        pid: u32,
        mappings: &Stamped<'_>,
    ) -> Result<Vec<bool>, KernelError> {
        self.python.publish(kernel, pid, mappings)?;
        self.java.publish(kernel, pid, mappings)?;
        self.go.publish(kernel, pid, mappings)?;
        self.thread_ctx.publish(kernel, pid, mappings)?;
        Ok(mappings
            .iter()
            .map(|(vma, stamp)| {
                stamp.is_some_and(|s| {
                    self.python.known_not(&s)
                        && self.java.known_not(vma, &s)
                        && self.go.lets_wait(&s)
                        && self.thread_ctx.known_not(&s)
                })
            })
            .collect())
    }

    /// Serves the Python walk's and the Go labels' requests, and tries the
    /// JVMs still starting and the thread contexts not placed yet again.
    fn serve(&mut self, kernel: &mut impl WatchMaps) -> Result<(), KernelError> {
        self.python.serve(kernel)?;
        self.java.serve(kernel)?;
        self.go.serve(kernel)?;
        self.thread_ctx.serve(kernel)
    }

    /// Serves the request maps that `rang`, only those: each read walks
    /// its map's buckets (the rest wait for the poll's [`Walked::serve`]).
    fn serve_rung(&mut self, kernel: &mut impl WatchMaps, rang: Rang) -> Result<(), KernelError> {
        if rang.python() {
            self.python.serve(kernel)?;
        }
        if rang.java() {
            self.java.serve(kernel)?;
        }
        if rang.go_labels() {
            self.go.serve(kernel)?;
        }
        Ok(())
    }

    fn forget(&mut self, kernel: &mut impl WatchMaps, pid: u32) -> Result<(), KernelError> {
        self.python.forget(kernel, pid)?;
        self.java.forget(kernel, pid)?;
        self.go.forget(kernel, pid)?;
        self.thread_ctx.forget(kernel, pid)
    }
}

impl ProcessWatch {
    /// Starts watching, with the `--pid` targets already read (and their
    /// tables in the kernel, so their first samples are walked by table).
    /// It follows the kernel's records of kernel symbols, and with
    /// `record_mappings` (targets that appear at any time: `--all`,
    /// `--comm`) its mmap records too; where they cannot be opened, it
    /// says so and goes on without. With `goroutine_wakers`, each Go
    /// target's binary is probed as its first process is published.
    ///
    /// # Errors
    /// When the kernel maps cannot be written.
    pub fn start(
        unwind: Unwind,
        targets: &Target,
        (record_mappings, goroutine_wakers): (bool, bool),
        kernel: &mut impl WatchMaps,
    ) -> Result<Self, KernelError> {
        let mut unwinder = match unwind {
            Unwind::Tables { rows } => Unwinder::new(rows),
            Unwind::FramePointers => Unwinder::without_tables(),
        };
        let events = MappingEvents::open(record_mappings)
            .inspect_err(|e| {
                let lacking = if record_mappings {
                    "processes that live less than 200 ms, and BPF programs loaded from now on,"
                } else {
                    "BPF programs loaded from now on"
                };
                tracing::warn!("{lacking} will lack names: {}", crate::error_chain(e));
            })
            .ok();
        if record_mappings && events.is_some() {
            unwinder.let_requests_wait();
        }
        let mut anew = Anew::default();
        anew.walked.go = GoLabels::new(goroutine_wakers);
        let mut watch = Self {
            unwinder,
            anew,
            events,
        };
        if let Target::Pids(pids) = targets {
            for &pid in pids {
                let published =
                    watch
                        .unwinder
                        .publish(kernel, pid, &mut publisher(&mut watch.anew.walked))?;
                if published == Published::Anew
                    && let Some(mappings) = watch.unwinder.identified_mappings(pid)
                {
                    let fresh = Fresh {
                        pid,
                        seen: ProcessSeen::default(),
                        mappings: mappings.collect(),
                    };
                    let Anew {
                        snapshots, known, ..
                    } = &mut watch.anew;
                    snapshot_all(known, snapshots, kernel, &[fresh], &[]);
                }
            }
        }
        Ok(watch)
    }

    /// Calls `notice` with the processes the kernel asks about (new,
    /// exec'd, mapped more) before any of their unwind tables is built.
    pub fn on_requests(&mut self, notice: impl FnMut(&[u32]) + Send + 'static) {
        self.unwinder.on_requests(notice);
    }

    /// Serves the kernel's requests in the maps it `rang` for; returns the
    /// processes whose mappings were read anew (first seen, or exec'd).
    ///
    /// # Errors
    /// When the kernel maps cannot be read or written.
    pub fn serve_rung(
        &mut self,
        kernel: &mut impl WatchMaps,
        rang: Rang,
    ) -> Result<Vec<u32>, KernelError> {
        let mut published = Vec::new();
        if rang.mappings() {
            published = self.serve_mappings(kernel, true)?.published;
        }
        if rang.runtimes() {
            let walked = &mut self.anew.walked;
            timed(Step::Requests, || walked.serve_rung(kernel, rang))?;
        }
        Ok(published)
    }

    /// Serves the kernel's requests, forgets exited processes and reads
    /// the mmap records (every poll); returns what
    /// [`ProcessWatch::serve_rung`] does.
    ///
    /// # Errors
    /// When the kernel maps cannot be read or written.
    pub fn serve(&mut self, kernel: &mut impl WatchMaps) -> Result<Vec<u32>, KernelError> {
        let served = self.serve_mappings(kernel, false)?;
        let walked = &mut self.anew.walked;
        timed(Step::Requests, || walked.serve(kernel))?;
        let unwinder = &mut self.unwinder;
        for pid in timed(Step::Exits, || unwinder.forget_exited(kernel))? {
            self.anew.walked.forget(kernel, pid)?;
        }
        if let Some(events) = &mut self.events {
            timed(Step::Records, || events.read());
        }
        Ok(served.published)
    }

    /// Serves the kernel's mapping requests: when it `rang` (the unchanged
    /// ones put back), or at the poll.
    fn serve_mappings(
        &mut self,
        kernel: &mut impl WatchMaps,
        rang: bool,
    ) -> Result<Served, KernelError> {
        let Anew {
            snapshots,
            known,
            walked,
        } = &mut self.anew;
        let (read, on_read) = (publisher(walked), snapshotter(known, snapshots));
        if rang {
            self.unwinder.serve_rung(kernel, read, on_read)
        } else {
            self.unwinder.serve_requests(kernel, read, on_read)
        }
    }

    /// The snapshots taken since the last call, for the next chunk.
    pub fn take_snapshots(&mut self) -> Vec<Arc<ProcessSnapshot>> {
        std::mem::take(&mut self.anew.snapshots)
    }

    /// What the kernel's records told since the last call, for the next
    /// chunk: images recorded to their end, kernel symbols, the counts.
    pub fn take_recorded(&mut self) -> Recorded {
        self.events
            .as_mut()
            .map(MappingEvents::take)
            .unwrap_or_default()
    }

    /// Reads the Python code objects the walk asked for.
    ///
    /// # Errors
    /// When the kernel map cannot be read.
    pub fn serve_python(&mut self, kernel: &mut impl WatchMaps) -> Result<(), KernelError> {
        self.anew.walked.python.serve(kernel)
    }

    /// The Python code objects read since the last call, for the next
    /// chunk.
    pub fn take_python_codes(&mut self) -> Vec<Arc<PythonCode>> {
        self.anew.walked.python.take_codes()
    }

    /// The Java frames of `samples` (a chunk's) named, while their JVMs
    /// run, for the chunk.
    pub fn name_java(&mut self, samples: &[RawSample]) -> Vec<Arc<NamedFrame>> {
        self.anew.walked.java.name(samples)
    }

    /// Reads the Go label sets `samples` (a chunk's) recorded into their
    /// labels, while their processes run.
    pub fn label_go(&mut self, samples: &mut [RawSample]) {
        self.anew.walked.go.label(samples);
    }

    /// A window ends: the next names its Java frames again.
    pub fn new_window(&mut self) {
        self.anew.walked.java.new_window();
    }

    /// The unwinder's counters (none without tables) and the Python
    /// runtime's, as profile comments.
    #[must_use]
    pub fn comments(&self) -> Vec<String> {
        let mut comments = if self.unwinder.builds_tables() {
            self.unwinder.stats().comments()
        } else {
            Vec::new()
        };
        comments.extend(self.anew.walked.python.stats().comments());
        comments.extend(self.anew.walked.java.comments());
        let sets = self.anew.walked.go.set_counts();
        comments.push(format!("go_label_sets_gone: {}", sets.gone));
        comments.push(format!("go_label_sets_unreadable: {}", sets.unreadable));
        comments
    }

    /// The sizes of its caches, as gauges.
    #[must_use]
    pub fn levels(&self) -> Vec<(&'static str, u64)> {
        let walked = &self.anew.walked;
        vec![
            (
                "unwind_binaries_cached",
                self.unwinder.binaries_cached() as u64,
            ),
            (
                "unwind_processes_cached",
                self.unwinder.processes_cached() as u64,
            ),
            (
                "unwind_requests_waiting",
                self.unwinder.requests_waiting() as u64,
            ),
            (
                "python_binaries_cached",
                walked.python.binaries_cached() as u64,
            ),
            ("java_binaries_cached", walked.java.binaries_cached() as u64),
            (
                "go_label_binaries_cached",
                walked.go.binaries_cached() as u64,
            ),
            (
                "thread_ctx_binaries_cached",
                walked.thread_ctx.binaries_cached() as u64,
            ),
        ]
    }
}

/// Publishes (or forgets) a process as a Python process, a JVM or a Go
/// process as soon
/// as the unwinder has published its mappings.
fn publisher<M: WatchMaps>(
    walked: &mut Walked,
) -> impl FnMut(&mut M, u32, &Stamped<'_>) -> Result<Vec<bool>, KernelError> + '_ {
    move |kernel, pid, mappings| walked.publish(kernel, pid, mappings)
}

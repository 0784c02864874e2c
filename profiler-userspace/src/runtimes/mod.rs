//! Language runtimes seen from outside: the one seam a runtime plugs into
//! (the OpenTelemetry profiler's `interpreter/` is the model).
//!
//! A runtime is a [`Runtime`] (`seam.rs`): it recognises its binaries
//! (`load`, once per file, shared by the processes running it), attaches
//! to a process that runs one (`attach`, its per-process
//! [`RuntimeProcess`]), and each attached process's state is read at a
//! fixed rate into rows of its own, summed by the runtime's compact key
//! and labelled (`sample::RowLabels`) once per row and chunk, weighted in
//! nanoseconds. The daemon sees
//! only [`Runtimes`]: it tells them the targets and the processes that
//! started or exec'd, and takes their rows and counters with each chunk.
//!
//! - `binaries.rs`: what each file is, loaded once and kept while used;
//! - `file_memo.rs`: what the walk's runtimes made of each mapped file,
//!   read once and bounded;
//! - `watcher.rs`: which targets run a runtime, and one read of each at
//!   every tick (generic over the runtime);
//! - `thread.rs`: the watcher's thread, and what the daemon takes from it;
//! - `dwarf.rs`: structure layouts from a binary's DWARF;
//! - `tls.rs`: where an executable's thread-local variables are;
//! - `go/`: Go, whose rows are the goroutine view;
//! - `thread_ctx/`: OpenTelemetry's thread context (trace and span ids),
//!   published to the samples as `python/` is.
//!
//! Adding a runtime: a folder beside `go/` with a type that implements
//! [`Runtime`], a [`Kind`] for it (`seam.rs`), and its line in
//! [`Runtimes::start`].
//!
//! A runtime whose frames belong inside every stack (an interpreter) plugs
//! into the kernel walk instead: `python/` is one. The walk records its
//! frames in place of the interpreter loop's native frames; the runtime
//! is published per process with the unwinder's mappings
//! (`process_watch.rs`), reads what the walk recorded for the first time
//! on the same thread, and hands the symbolizer what it read with each
//! chunk.
mod binaries;
pub mod dwarf;
mod file_memo;
pub mod go;
pub mod java;
pub mod python;
mod seam;
mod segments;
mod thread;
pub mod thread_ctx;
mod tls;
mod watcher;

pub use seam::{Kind, Read, ReadStats, Runtime, RuntimeFacts, RuntimeProcess, Unit};
use thread::RuntimeThread;

use std::sync::Arc;

use crate::{config::Target, sample::RawSample};

/// Tells the runtimes' readers of processes started or exec'd.
pub type Noticer = Arc<dyn Fn(&[u32]) + Send + Sync>;

/// The runtimes being read, each on its thread.
pub struct Runtimes {
    threads: Vec<Box<dyn Reading>>,
}

/// A runtime's thread, whatever the runtime.
trait Reading: Send {
    fn set_target(&self, target: &Target);
    fn noticer(&self) -> Noticer;
    fn take_into(&self, samples: &mut Vec<RawSample>, facts: &mut RuntimeFacts);
}

impl<R: Runtime> Reading for RuntimeThread<R> {
    fn set_target(&self, target: &Target) {
        RuntimeThread::set_target(self, target);
    }

    fn noticer(&self) -> Noticer {
        Arc::new(RuntimeThread::noticer(self))
    }

    fn take_into(&self, samples: &mut Vec<RawSample>, facts: &mut RuntimeFacts) {
        let (rows, wall_pids, stats) = self.take();
        samples.extend(rows);
        facts.wall_pids.extend(wall_pids);
        let i = Kind::ALL.iter().position(|&k| k == R::KIND).unwrap_or(0);
        facts.stats[i].add(&stats);
    }
}

impl Runtimes {
    /// Starts reading the runtimes' processes among `target`,
    /// `go_frequency_hz` times a second (`None`: no goroutine view);
    /// `go_wakes`: where the goroutines' wakeups are, with
    /// `--goroutine-wakers`.
    #[must_use]
    pub fn start(
        go_frequency_hz: Option<u64>,
        go_wakes: Option<Arc<dyn crate::bpf::GoWakeLookup>>,
        target: &Target,
    ) -> Self {
        let mut threads: Vec<Box<dyn Reading>> = Vec::new();
        if let Some(hz) = go_frequency_hz {
            let go = go::Go { wakes: go_wakes };
            threads.push(Box::new(RuntimeThread::start(go, hz, target)));
        }
        Self { threads }
    }

    /// The targets as they are now.
    pub fn set_target(&self, target: &Target) {
        for thread in &self.threads {
            thread.set_target(target);
        }
    }

    /// Processes `pids` started or exec'd: they are looked at now, not at
    /// the next refresh.
    pub fn notice(&self, pids: &[u32]) {
        (self.noticer())(pids);
    }

    /// What tells every runtime's reader of processes started or exec'd,
    /// from wherever they are first seen.
    #[must_use]
    pub fn noticer(&self) -> Noticer {
        let each: Vec<_> = self.threads.iter().map(|t| t.noticer()).collect();
        Arc::new(move |pids: &[u32]| {
            if !pids.is_empty() {
                for notice in &each {
                    notice(pids);
                }
            }
        })
    }

    /// The rows read since the last call, and what the reads found.
    #[must_use]
    pub fn take(&self) -> (Vec<RawSample>, RuntimeFacts) {
        let mut samples = Vec::new();
        let mut facts = RuntimeFacts::default();
        for thread in &self.threads {
            thread.take_into(&mut samples, &mut facts);
        }
        (samples, facts)
    }
}

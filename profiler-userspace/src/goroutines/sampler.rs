//! The thread that reads the Go targets' goroutines at a fixed rate
//! (`reader.rs`), and what the daemon takes from it with each chunk.
use std::{
    collections::BTreeSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use profiler_common::sample::ThreadState;

use super::reader::{Collected, GoroutineStats, Reader, Shared};
use crate::{
    config::Target,
    sample::{RawSample, Stack},
};

/// What the daemon takes with each chunk.
#[derive(Clone, Debug, Default)]
pub struct GoroutineChunk {
    /// One row per goroutine, state and stack, weighted in nanoseconds.
    pub samples: Vec<RawSample>,
    /// The processes whose goroutines were read: their threads' off-CPU
    /// time is left out of `wall`, where their goroutines' time is.
    pub pids: BTreeSet<u32>,
    pub stats: GoroutineStats,
}

/// The goroutine reader's thread.
pub struct GoroutineSampler {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl GoroutineSampler {
    /// Starts reading the Go processes among `target` `frequency_hz` times
    /// a second.
    #[must_use]
    pub fn start(frequency_hz: u64, target: &Target) -> Self {
        let shared = Arc::new(Shared {
            collected: Mutex::default(),
            target: Mutex::new(target.clone()),
            noticed: Mutex::default(),
            stop: AtomicBool::new(false),
        });
        let period = Duration::from_nanos(1_000_000_000 / frequency_hz.max(1));
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("goroutines".into())
                .spawn(move || Reader::new(frequency_hz).run(&shared, period))
                .ok()
        };
        Self { shared, thread }
    }

    /// The targets as they are now.
    pub fn set_target(&self, target: &Target) {
        if let Ok(mut t) = self.shared.target.lock() {
            t.clone_from(target);
        }
    }

    /// Processes `pids` started or exec'd (their mappings were just read):
    /// the reader is woken to look at them now, so a target that execs
    /// into Go is read from within milliseconds, not at the next refresh.
    pub fn notice(&self, pids: &[u32]) {
        if pids.is_empty() {
            return;
        }
        if let Ok(mut noticed) = self.shared.noticed.lock() {
            noticed.extend_from_slice(pids);
        }
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
    }

    /// What was read since the last call.
    #[must_use]
    pub fn take(&self) -> GoroutineChunk {
        let Ok(mut collected) = self.shared.collected.lock() else {
            return GoroutineChunk::default();
        };
        let Collected { rows, pids, stats } = std::mem::take(&mut *collected);
        let samples = rows
            .into_iter()
            .map(|(key, ns)| RawSample {
                pid: key.pid,
                tid: 0,
                thread: String::new(),
                state: ThreadState::Unknown,
                user_stack: key.stack,
                kernel_stack: Stack::Absent,
                samples: 0,
                off_cpu_ns: 0,
                off_cpu_count: 0,
                goroutine: Some(Arc::new(key.goroutine)),
                goroutine_ns: ns,
            })
            .collect();
        GoroutineChunk {
            samples,
            pids,
            stats,
        }
    }
}

impl Drop for GoroutineSampler {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

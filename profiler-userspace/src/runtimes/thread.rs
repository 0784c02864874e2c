//! A runtime's reader thread (`watcher.rs` is what it does), and what the
//! daemon takes from it with each chunk.
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

use super::{
    seam::{ReadStats, Runtime, RuntimeProcess as _},
    watcher::{Collected, KeyOf, Shared, Watcher},
};
use crate::{
    config::Target,
    sample::{RawSample, Stack},
};

/// One runtime's reader thread.
pub(super) struct RuntimeThread<R: Runtime> {
    shared: Arc<Shared<KeyOf<R>>>,
    thread: Option<JoinHandle<()>>,
    runtime: std::marker::PhantomData<fn() -> R>,
}

/// Puts the calling thread in `SCHED_FIFO` at the lowest priority, so it
/// runs as soon as its timer fires rather than when a CPU frees up. A
/// reader left to the normal scheduler on a host its target keeps busy
/// runs when one of the target's threads goes to sleep, and reads the
/// program in its waits more often than time does (measured here: +3 to
/// +6% under the sleeping function; +14% where the issue found it). Its
/// work is bounded (`MAX_PER_SECOND`
/// units a second), and the kernel's real-time throttling bounds it too.
fn prompt_wakeups() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `param` is a valid sched_param that outlives the call; pid 0
    // is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

impl<R: Runtime> RuntimeThread<R> {
    /// Starts reading `runtime`'s processes among `target` `frequency_hz`
    /// times a second.
    pub(super) fn start(runtime: R, frequency_hz: u64, target: &Target) -> Self {
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
                .name(R::KIND.thread_name().into())
                .spawn(move || {
                    if let Err(e) = prompt_wakeups() {
                        log::warn!(
                            "{} reader at normal priority (SCHED_FIFO: {e}): on a host whose \
                             CPUs are busy its reads may land late and over-weigh waits \
                             (goroutine_ticks_late counts them)",
                            R::KIND.thread_name()
                        );
                    }
                    Watcher::new(runtime, frequency_hz).run(&shared, period);
                })
                .ok()
        };
        Self {
            shared,
            thread,
            runtime: std::marker::PhantomData,
        }
    }

    /// The targets as they are now.
    pub(super) fn set_target(&self, target: &Target) {
        if let Ok(mut t) = self.shared.target.lock() {
            t.clone_from(target);
        }
    }

    /// What tells the reader of processes started or exec'd (their
    /// mappings were just read): it looks at them once they have settled
    /// (`watcher/shared.rs`'s `SETTLE`), so a target that execs into the runtime is
    /// read from within tens of milliseconds, not at the next refresh.
    pub(super) fn noticer(&self) -> impl Fn(&[u32]) + Send + Sync + 'static {
        let shared = Arc::clone(&self.shared);
        let thread = self.thread.as_ref().map(|t| t.thread().clone());
        move |pids: &[u32]| {
            if pids.is_empty() || !shared.notice(pids) {
                return;
            }
            // Nothing was waiting: woken to plan the look.
            if let Some(thread) = &thread {
                thread.unpark();
            }
        }
    }

    /// What was read since the last call: one row per unit, state and
    /// stack, weighted in nanoseconds; the processes read; the counts.
    pub(super) fn take(&self) -> (Vec<RawSample>, BTreeSet<u32>, ReadStats) {
        let Ok(mut collected) = self.shared.collected.lock() else {
            return Default::default();
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
                labels: Some(Arc::new(R::Process::labels(&key.key))),
                runtime_ns: ns,
                label_set: None,
                thread_attrs: None,
                woken_by: R::Process::woken_by(&key.key),
            })
            .collect();
        (samples, pids, stats)
    }
}

impl<R: Runtime> Drop for RuntimeThread<R> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

//! The daemon's one symbolizer, on its own thread (blazesym's symbolizer is
//! not `Send`): the periodic windows, the pushes and the HTTP requests are
//! all assembled into profiles there, so they share its caches and its
//! debuginfod downloads. Jobs run in the order they come.
use std::{
    sync::mpsc,
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

use crate::{
    assemble::{Accounting, WindowTimes, assemble},
    config,
    cpu_time::{Step, timed},
    profile::{Profile, View},
    symbolize::{Debuginfod, Symbolizer, debuginfod::DebuginfodError},
    window::RawWindow,
};

/// Why the symbolizer's thread did not start.
#[derive(Debug, thiserror::Error)]
pub enum AssemblerError {
    #[error(transparent)]
    Debuginfod(#[from] DebuginfodError),
    #[error("starting the symbolizer thread")]
    Thread(#[source] std::io::Error),
}

/// What to do with an assembled profile, on the symbolizer's thread; the
/// `Duration` is how long its assembly took.
type Done = Box<dyn FnOnce(Profile, Accounting, Duration) + Send>;

/// A window (or part, or request) to assemble.
struct Job {
    raw: RawWindow,
    times: WindowTimes,
    period_ns: u64,
    view: View,
    done: Done,
}

/// A handle to the symbolizer's thread; clones share it. The thread ends
/// when the last handle is dropped, after the jobs already sent.
#[derive(Clone)]
pub struct Assembler {
    jobs: mpsc::Sender<Job>,
}

/// The symbolizer's thread itself, to wait for at shutdown.
pub struct AssemblerThread(JoinHandle<()>);

impl AssemblerThread {
    /// Waits for the thread to end: after every [`Assembler`] is dropped
    /// and the jobs sent before are done.
    pub fn join(self) {
        // A panic there was reported when it happened.
        let _ = self.0.join();
    }
}

impl Assembler {
    /// Starts the thread, with debuginfod's download thread if `symbols`
    /// has servers.
    ///
    /// # Errors
    /// When debuginfod's cache or thread, or this thread, cannot start.
    pub fn start(
        symbols: &config::Symbols,
        what_if: Option<config::WhatIf>,
    ) -> Result<(Self, AssemblerThread), AssemblerError> {
        let debuginfod = symbols
            .debuginfod
            .as_ref()
            .map(Debuginfod::start)
            .transpose()?;
        let (jobs, queue) = mpsc::channel::<Job>();
        let symbols = symbols.clone();
        let thread = thread::Builder::new()
            .name("symbolizer".to_owned())
            .spawn(move || {
                let mut symbolizer = Symbolizer::new(&symbols, debuginfod);
                while let Ok(job) = queue.recv() {
                    let started = Instant::now();
                    let (profile, accounting) = timed(Step::Symbolize, || {
                        assemble(
                            &job.raw,
                            &mut symbolizer,
                            job.times,
                            job.period_ns,
                            job.view,
                            what_if.as_ref(),
                        )
                    });
                    (job.done)(profile, accounting, started.elapsed());
                    crate::allocator::give_back_freed();
                }
            })
            .map_err(AssemblerError::Thread)?;
        Ok((Self { jobs }, AssemblerThread(thread)))
    }

    /// Assembles `raw` on the thread and hands the result to `done`
    /// there, without waiting.
    pub fn submit(
        &self,
        raw: RawWindow,
        times: WindowTimes,
        period_ns: u64,
        view: View,
        done: impl FnOnce(Profile, Accounting, Duration) + Send + 'static,
    ) {
        let job = Job {
            raw,
            times,
            period_ns,
            view,
            done: Box::new(done),
        };
        // The thread only ends when every handle is gone, or by a panic,
        // which `assemble` reports.
        let _ = self.jobs.send(job);
    }
}

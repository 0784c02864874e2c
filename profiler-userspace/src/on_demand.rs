//! Profiles asked for over HTTP (`/debug/pprof/...?seconds=N`).
//!
//! A request starts when the window loop drains the kernel maps for it
//! (so it holds nothing from before it arrived) and ends with the first
//! drain after its seconds are up, which the loop schedules for that
//! instant. Every drain's chunk goes to the periodic window and to each
//! request under way, so both come from the same kernel data and neither
//! takes anything from the other. Finished requests are symbolized and
//! encoded on their own thread, with their own symbolizer, so the
//! periodic files never wait for them.
use std::{
    sync::mpsc,
    thread,
    time::{Duration, SystemTime},
};

use tokio::{sync::oneshot, time::Instant};

use crate::{
    assemble::{WindowTimes, assemble},
    config, pprof,
    profile::View,
    symbolize::{Debuginfod, Symbolizer},
    window::RawWindow,
};

/// What a request gets back: a gzip'd pprof, or why not.
pub type Reply = Result<Vec<u8>, ReplyError>;

/// Why a finished request has no profile.
#[derive(Debug, thiserror::Error)]
pub enum ReplyError {
    #[error("compressing the profile")]
    Compress(#[source] std::io::Error),
}

/// A profile asked for over HTTP.
#[derive(Debug)]
pub struct ProfileRequest {
    pub view: View,
    pub duration: Duration,
    pub reply: oneshot::Sender<Reply>,
}

/// A request under way: what it has collected so far.
struct Active {
    request: ProfileRequest,
    started: SystemTime,
    start_ns: u64,
    due: Instant,
    raw: RawWindow,
}

/// The requests under way, and the thread that finishes them.
pub struct OnDemand {
    active: Vec<Active>,
    jobs: mpsc::Sender<Job>,
}

/// A request's data, ready to symbolize.
struct Job {
    raw: RawWindow,
    view: View,
    times: WindowTimes,
    reply: oneshot::Sender<Reply>,
}

impl OnDemand {
    /// Starts the thread that symbolizes and encodes finished requests.
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub fn new(symbols: &config::Symbols, period_ns: u64) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::channel();
        let symbols = symbols.clone();
        thread::Builder::new()
            .name("on-demand".to_owned())
            .spawn(move || finish_requests(&queue, &symbols, period_ns))?;
        Ok(Self {
            active: Vec::new(),
            jobs,
        })
    }

    /// Starts `request` at the drain that ended at `now_ns`.
    pub fn start(&mut self, request: ProfileRequest, now_ns: u64) {
        self.active.push(Active {
            due: Instant::now() + request.duration,
            request,
            started: SystemTime::now(),
            start_ns: now_ns,
            raw: RawWindow::default(),
        });
    }

    /// When the next request is due: the loop drains then.
    #[must_use]
    pub fn next_due(&self) -> Option<Instant> {
        self.active.iter().map(|a| a.due).min()
    }

    /// Adds a drained chunk (ending at `end_ns`) to every request under
    /// way, and hands those that are due to the finishing thread. A request
    /// whose client has gone is dropped.
    pub fn add_chunk(&mut self, chunk: &RawWindow, end_ns: u64) {
        let now = Instant::now();
        let mut still_active = Vec::with_capacity(self.active.len());
        for mut active in self.active.drain(..) {
            if active.request.reply.is_closed() {
                continue;
            }
            active.raw.absorb(chunk);
            if active.due > now {
                still_active.push(active);
                continue;
            }
            let view = active.request.view;
            active
                .raw
                .samples
                .retain(|s| view.shows(s.samples, s.off_cpu_ns, s.off_cpu_count));
            let job = Job {
                raw: active.raw,
                view,
                times: WindowTimes {
                    start: active.started,
                    duration_ns: end_ns.saturating_sub(active.start_ns),
                },
                reply: active.request.reply,
            };
            // The thread lives as long as `self`; if it died, the
            // dropped reply tells the client.
            let _ = self.jobs.send(job);
        }
        self.active = still_active;
    }
}

/// The finishing thread: symbolize, encode, gzip, reply.
fn finish_requests(queue: &mpsc::Receiver<Job>, symbols: &config::Symbols, period_ns: u64) {
    let debuginfod = symbols.debuginfod.as_ref().and_then(|config| {
        Debuginfod::start(config)
            .inspect_err(|e| {
                tracing::warn!(
                    "on-demand profiles get no debuginfod downloads: {}",
                    crate::error_chain(e)
                );
            })
            .ok()
    });
    let mut symbolizer = Symbolizer::new(symbols, debuginfod);
    while let Ok(job) = queue.recv() {
        let (profile, _) = assemble(&job.raw, &mut symbolizer, job.times, period_ns, job.view);
        let reply = pprof::gzip(&pprof::encode(&profile)).map_err(ReplyError::Compress);
        let _ = job.reply.send(reply);
    }
}

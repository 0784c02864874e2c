//! Profiles asked for over HTTP (`/debug/pprof/...?seconds=N`).
//!
//! A request starts when the window loop drains the kernel maps for it
//! (so it holds nothing from before it arrived) and ends with the first
//! drain after its seconds are up, which the loop schedules for that
//! instant. Every drain's chunk goes to the periodic window and to each
//! request under way, so both come from the same kernel data and neither
//! takes anything from the other. Finished requests are symbolized,
//! encoded and answered on the symbolizer's thread (`symbolizer_thread.rs`),
//! which the windows share: the loop never waits for them.
use std::time::{Duration, SystemTime};

use tokio::{sync::oneshot, time::Instant};

use crate::{
    assemble::WindowTimes, output::pprof, profile::View, symbolizer_thread::Assembler,
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

/// The requests under way, and the symbolizer that finishes them.
pub struct OnDemand {
    active: Vec<Active>,
    assembler: Assembler,
    period_ns: u64,
}

impl OnDemand {
    /// No request yet; finished ones go to `assembler`.
    #[must_use]
    pub fn new(assembler: Assembler, period_ns: u64) -> Self {
        Self {
            active: Vec::new(),
            assembler,
            period_ns,
        }
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
    /// way, and hands those that are due to the symbolizer, which answers
    /// them. A request whose client has gone is dropped.
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
                .retain_samples(|s| view.shows(s.samples, s.off_cpu_ns, s.off_cpu_count));
            let times = WindowTimes {
                start: active.started,
                duration_ns: end_ns.saturating_sub(active.start_ns),
            };
            let reply = active.request.reply;
            // If the thread died, the dropped reply tells the client.
            self.assembler.submit(
                active.raw,
                times,
                self.period_ns,
                view,
                move |profile, _, _| {
                    let gzipped =
                        pprof::gzip(&pprof::encode(&profile)).map_err(ReplyError::Compress);
                    let _ = reply.send(gzipped);
                },
            );
        }
        self.active = still_active;
    }
}

#[cfg(test)]
mod tests;

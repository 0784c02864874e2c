//! What the kernel's data passes through on its way to a file and to the
//! backends: drain a chunk (flip the slots, read the old one, account the
//! off-CPU intervals still open) and collect chunks into a segment. A
//! segment ends when a window ends or a push is due; it is symbolized once,
//! on the symbolizer's thread while the window loop goes on, and its rows
//! go both to the window (encoded and written once the segment that ended
//! it is back) and, with `--push`, to the next push (`outlets.rs`).
mod outlets;

use std::{
    collections::VecDeque,
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use tokio::{sync::oneshot, time::sleep};

pub use outlets::{Assembled, Written};
use outlets::{Ends, Outlets, PushEnds, WindowEnds};

use crate::{
    assemble::WindowTimes,
    bpf::{InFlightMaps, KernelError, Rng, WindowMaps},
    config::{Config, Target},
    cpu_time::{self, Step},
    output::metrics::{FilledMap, Metrics},
    output::push::Pusher,
    output::sink::FileSink,
    profile::View,
    symbolizer_thread::Assembler,
    window::{ChunkCollector, RawWindow},
};

/// How long to wait after flipping slots before reading the old one: an
/// eBPF program that read the slot number just before the flip finishes
/// within microseconds.
const FLIP_GRACE: Duration = Duration::from_millis(5);

/// Why a chunk is drained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainReason {
    /// The window ends.
    Window,
    /// An on-demand profile starts or ends.
    Request,
    /// A kernel map passed [`EARLY_DRAIN_FILL`].
    Full,
    /// A push is due.
    Push,
}

impl DrainReason {
    fn label(self) -> &'static str {
        match self {
            Self::Window => "window",
            Self::Request => "request",
            Self::Full => "full",
            Self::Push => "push",
        }
    }
}

/// The fill of the samples or stacks map (of its capacity) past which the
/// window loop drains early, into the same window: with the loop checking
/// every 200 ms, the last quarter of the stacks map (4,096 entries) takes
/// over 20,000 new stacks a second to fill before the next check (the
/// samples map's, 8,192 entries, over 40,000).
pub const EARLY_DRAIN_FILL: f64 = 0.75;

/// The window being collected, the segments the symbolizer has, and
/// where they go when back.
pub struct Pipeline {
    assembler: Assembler,
    /// The random source of the sampling rule for still-open intervals.
    rng: Rng,
    metrics: Arc<Metrics>,
    /// The chunks drained since the last segment ended, merged.
    segment: RawWindow,
    /// The window's start, by the wall clock and on the kernel's clock
    /// (its first chunk's; `None` before it).
    window_start: SystemTime,
    window_start_ns: Option<u64>,
    /// Time spent draining this window's chunks.
    drain_time: Duration,
    /// The push period's start, the same two ways (with `--push`).
    push_start: SystemTime,
    push_start_ns: Option<u64>,
    /// The segments sent to the symbolizer, oldest first, and what each
    /// ends.
    in_flight: VecDeque<(oneshot::Receiver<Assembled>, Ends)>,
    outlets: Outlets,
}

impl Pipeline {
    /// The pipeline, symbolizing with `assembler`, with its sink and the
    /// sampling RNG; `pusher` with `--push`.
    #[must_use]
    pub fn new(
        config: &Config,
        metrics: Arc<Metrics>,
        pusher: Option<Pusher>,
        assembler: Assembler,
    ) -> Self {
        let sink = FileSink::new(config.output_dir.clone(), config.retain);
        Self {
            assembler,
            rng: Rng::new(),
            metrics: Arc::clone(&metrics),
            segment: RawWindow::default(),
            window_start: SystemTime::now(),
            window_start_ns: None,
            drain_time: Duration::ZERO,
            push_start: SystemTime::now(),
            push_start_ns: None,
            in_flight: VecDeque::new(),
            outlets: Outlets::new(sink, metrics, pusher),
        }
    }

    /// Ends a chunk: flips the kernel to the other slot, reads the old one
    /// and accounts the off-CPU intervals still open. Returns the chunk's
    /// collector, for the other sources to add to, and its end on the
    /// kernel's clock; [`Pipeline::collect`] adds the finished chunk to the
    /// segment.
    ///
    /// # Errors
    /// When the kernel maps cannot be flipped, read or cleared.
    pub async fn drain_chunk(
        &mut self,
        kernel: &mut (impl WindowMaps + InFlightMaps),
        config: &Config,
        targets: &Target,
        reason: DrainReason,
    ) -> Result<(ChunkCollector, u64), KernelError> {
        let flip = kernel.flip()?;
        self.window_start_ns.get_or_insert(flip.start_ns);
        self.push_start_ns.get_or_insert(flip.start_ns);
        sleep(FLIP_GRACE).await;
        let started = Instant::now();
        let rng = &mut self.rng;
        let chunk = cpu_time::timed(Step::Drain, || {
            let mut chunk =
                ChunkCollector::drained(kernel.drain(&flip)?, reason == DrainReason::Full);
            if let Some(rule) = config.modes.off_cpu() {
                let (open, stats) = kernel.account_in_flight(&flip, rule, targets, rng)?;
                chunk.add_in_flight(open, stats);
            }
            Ok::<_, KernelError>(chunk)
        })?;
        self.drain_time += started.elapsed();
        self.metrics.drained(reason.label());
        let (samples, stacks) = chunk.map_entries().fill();
        self.metrics.set_map_fill(FilledMap::Samples, samples);
        self.metrics.set_map_fill(FilledMap::Stacks, stacks);
        Ok((chunk, flip.end_ns))
    }

    /// Adds a drained chunk to the segment.
    pub fn collect(&mut self, chunk: RawWindow) {
        if self.segment.is_empty() {
            self.segment = chunk;
        } else {
            self.segment.absorb(&chunk);
        }
    }

    /// Ends the segment: sends its chunks to the symbolizer, to be
    /// symbolized once, and notes what ends with it.
    fn end_segment(&mut self, config: &Config, ends: Ends) {
        let raw = std::mem::take(&mut self.segment);
        let times = WindowTimes {
            start: self.window_start,
            duration_ns: 0,
        };
        let (reply, back) = oneshot::channel();
        self.assembler.submit(
            raw,
            times,
            config.sample_period_ns(),
            View::Wall,
            move |profile, accounting, took| {
                let _ = reply.send(Assembled {
                    samples: profile.samples,
                    accounting,
                    took,
                });
            },
        );
        self.in_flight.push_back((back, ends));
    }

    /// Ends the push period at `end_ns` (its last chunk collected): once
    /// symbolized, its profile goes to the pusher, which sends it in the
    /// background. Nothing without `--push`.
    pub fn push(&mut self, config: &Config, end_ns: u64) {
        if !self.outlets.pushing() {
            return;
        }
        let start_ns = self.push_start_ns.take().unwrap_or(end_ns);
        let push = PushEnds {
            start: std::mem::replace(&mut self.push_start, SystemTime::now()),
            duration_ns: end_ns.saturating_sub(start_ns),
            period_ns: config.sample_period_ns(),
        };
        let ends = Ends {
            push: Some(push),
            ..Ends::default()
        };
        self.end_segment(config, ends);
    }

    /// Ends the window at `end_ns` (its last chunk collected): once its
    /// last segment is symbolized, it is encoded and written
    /// ([`Pipeline::absorb`]). The next window starts here.
    pub fn finish(
        &mut self,
        config: &Config,
        targets: &Target,
        end_ns: u64,
        unwind_comments: Vec<String>,
        levels: Vec<(&'static str, u64)>,
    ) {
        let start_ns = self.window_start_ns.take().unwrap_or(end_ns);
        let window = WindowEnds {
            start: std::mem::replace(&mut self.window_start, SystemTime::now()),
            duration_ns: end_ns.saturating_sub(start_ns),
            period_ns: config.sample_period_ns(),
            drain_time: std::mem::take(&mut self.drain_time),
            targets: targets.clone(),
            unwind_comments,
            levels,
        };
        let ends = Ends {
            window: Some(window),
            ..Ends::default()
        };
        self.end_segment(config, ends);
    }

    /// Whether a segment is with the symbolizer.
    #[must_use]
    pub fn waiting(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// The oldest segment with the symbolizer, when it is back; never,
    /// with none there. Cancel-safe: the segment stays until it is back.
    ///
    /// # Panics
    /// If the symbolizer's thread panicked (a bug, as a panic in the
    /// daemon's own thread would be).
    pub async fn next_assembled(&mut self) -> Assembled {
        match self.in_flight.front_mut() {
            Some((back, _)) => back
                .await
                .expect("the symbolizer thread panicked; its message is above"),
            None => std::future::pending().await,
        }
    }

    /// Adds the oldest segment, back from the symbolizer, to the window
    /// and the push, and finishes what ended with it: returns how the
    /// window's write went if it ended one.
    pub fn absorb(&mut self, segment: Assembled) -> Option<Written> {
        let (_, ends) = self.in_flight.pop_front()?;
        self.outlets.absorb(segment, ends)
    }

    /// Windows whose file could not be written yet, kept for another try.
    #[must_use]
    pub fn files_waiting(&self) -> usize {
        self.outlets.sink.pending()
    }

    /// Stops pushing: what is not sent within `grace` stays in the spool
    /// for the next start.
    pub fn stop_pushing(&mut self, grace: Duration) {
        self.outlets.stop_pushing(grace);
    }
}

#[cfg(test)]
mod tests;

//! What the kernel's data passes through on its way to a file and to the
//! backends: drain a chunk (flip the slots, read the old one, account the
//! off-CPU intervals still open) and collect chunks into a segment. A
//! segment ends when a window ends or a push is due; it is symbolized once
//! and its rows go both to the window (encoded and written at the
//! window's end) and, with `--push`, to the next push.
use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use profiler_common::stats::Stat;
use tokio::time::sleep;

use crate::{
    assemble::{Accounting, WindowTimes},
    assembler::Assembler,
    bpf::{InFlightMaps, KernelError, Rng, WindowMaps},
    config::{Config, Target},
    metrics::{FilledMap, Metrics, Step},
    pprof,
    profile::{Profile, Sample, View, merge_samples},
    push::Pusher,
    sink::{FileSink, SinkError},
    window::RawWindow,
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

/// How writing a finished window went. A kernel failure is an error of
/// the pipeline (fatal); a sink failure is not, since the window is kept
/// for another try.
pub enum Written {
    Done,
    /// The file could not be written; the sink keeps the window.
    Deferred(SinkError),
}

/// Symbolized rows and their accounting: a window, or a push, so far.
#[derive(Default)]
struct Rows {
    samples: Vec<Sample>,
    accounting: Accounting,
    /// Start of the first chunk on the kernel's clock; `None` before it.
    start_ns: Option<u64>,
}

impl Rows {
    fn add(&mut self, samples: Vec<Sample>, accounting: Accounting) {
        merge_samples(&mut self.samples, samples);
        self.accounting.absorb(accounting);
    }

    /// The rows so far, leaving this empty; and their length up to `end_ns`.
    fn take(&mut self, end_ns: u64) -> (Self, u64) {
        let rows = std::mem::take(self);
        let duration_ns = end_ns.saturating_sub(rows.start_ns.unwrap_or(end_ns));
        (rows, duration_ns)
    }
}

/// The push under way: its rows so far, its start, and the pusher.
struct Pushing {
    pusher: Pusher,
    rows: Rows,
    start: SystemTime,
}

/// The window being collected, and what finishes it.
pub struct Pipeline {
    assembler: Assembler,
    pub sink: FileSink,
    /// The random source of the sampling rule for still-open intervals.
    rng: Rng,
    metrics: Arc<Metrics>,
    /// The chunks drained since the last segment ended, merged.
    segment: RawWindow,
    /// The window's symbolized segments.
    window: Rows,
    window_start: SystemTime,
    /// Time spent draining and symbolizing this window's chunks.
    drain_time: Duration,
    symbolize_time: Duration,
    /// With `--push`.
    push: Option<Pushing>,
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
        Self {
            assembler,
            sink: FileSink::new(config.output_dir.clone(), config.retain),
            rng: Rng::new(),
            metrics,
            segment: RawWindow::default(),
            window: Rows::default(),
            window_start: SystemTime::now(),
            drain_time: Duration::ZERO,
            symbolize_time: Duration::ZERO,
            push: pusher.map(|pusher| Pushing {
                pusher,
                rows: Rows::default(),
                start: SystemTime::now(),
            }),
        }
    }

    /// Ends a chunk: flips the kernel to the other slot, reads the old one
    /// and accounts the off-CPU intervals still open. Returns the chunk
    /// and its end on the kernel's clock; [`Pipeline::collect`] adds it to
    /// the segment.
    ///
    /// # Errors
    /// When the kernel maps cannot be flipped, read or cleared.
    pub async fn drain_chunk(
        &mut self,
        kernel: &mut (impl WindowMaps + InFlightMaps),
        config: &Config,
        targets: &Target,
        reason: DrainReason,
    ) -> Result<(RawWindow, u64), KernelError> {
        let flip = kernel.flip()?;
        self.window.start_ns.get_or_insert(flip.start_ns);
        if let Some(push) = &mut self.push {
            push.rows.start_ns.get_or_insert(flip.start_ns);
        }
        sleep(FLIP_GRACE).await;
        let started = Instant::now();
        let mut chunk = RawWindow::from(kernel.drain(&flip)?);
        if let Some(rule) = config.modes.off_cpu() {
            let (open, stats) = kernel.account_in_flight(&flip, rule, targets, &mut self.rng)?;
            chunk.samples.extend(open);
            chunk.in_flight = stats;
        }
        chunk.early_drains = u64::from(reason == DrainReason::Full);
        self.drain_time += started.elapsed();
        self.metrics.drained(reason.label());
        let (samples, stacks) = chunk.map_entries.fill();
        self.metrics.set_map_fill(FilledMap::Samples, samples);
        self.metrics.set_map_fill(FilledMap::Stacks, stacks);
        Ok((chunk, flip.end_ns))
    }

    /// Adds a drained chunk to the segment.
    pub fn collect(&mut self, chunk: RawWindow) {
        if self.segment.samples.is_empty() && self.segment.stats.iter().all(|&s| s == 0) {
            self.segment = chunk;
        } else {
            self.segment.absorb(&chunk);
        }
    }

    /// Ends the segment: symbolizes its chunks once and adds the rows to
    /// the window and to the push under way.
    fn end_segment(&mut self, config: &Config) {
        let raw = std::mem::take(&mut self.segment);
        let times = WindowTimes {
            start: self.window_start,
            duration_ns: 0,
        };
        let step = Instant::now();
        let (profile, accounting) =
            self.assembler
                .assemble(raw, times, config.sample_period_ns(), View::Wall);
        self.symbolize_time += step.elapsed();
        if let Some(push) = &mut self.push {
            push.rows.add(profile.samples.clone(), accounting.clone());
        }
        self.window.add(profile.samples, accounting);
    }

    /// Ends the push period at `end_ns` (its last chunk collected) and
    /// hands its profile to the pusher, which sends it in the background.
    /// Nothing without `--push`.
    pub fn push(&mut self, config: &Config, end_ns: u64) {
        if self.push.is_none() {
            return;
        }
        self.end_segment(config);
        let Some(push) = &mut self.push else { return };
        let (rows, duration_ns) = push.rows.take(end_ns);
        let profile = Profile {
            view: View::Wall,
            start: std::mem::replace(&mut push.start, SystemTime::now()),
            duration_ns,
            period_ns: config.sample_period_ns(),
            samples: rows.samples,
            comments: rows.accounting.comments(),
        };
        push.pusher.submit(profile);
    }

    /// Stops pushing: what is not sent within `grace` stays in the spool
    /// for the next start.
    pub fn stop_pushing(&mut self, grace: Duration) {
        if let Some(push) = self.push.take() {
            push.pusher.shut_down(grace);
        }
    }

    /// Finishes the window that ended at `end_ns` (its last chunk
    /// collected): symbolize the last segment, encode, write; the next
    /// window starts here.
    pub fn finish(
        &mut self,
        config: &Config,
        targets: &Target,
        end_ns: u64,
        unwind_comments: Vec<String>,
    ) -> Written {
        self.end_segment(config);
        let (window, duration_ns) = self.window.take(end_ns);
        let times = WindowTimes {
            start: std::mem::replace(&mut self.window_start, SystemTime::now()),
            duration_ns,
        };
        let drain_time = std::mem::take(&mut self.drain_time);
        let symbolize_time = std::mem::take(&mut self.symbolize_time);
        self.metrics.step(Step::Drain, drain_time);
        self.metrics.step(Step::Symbolize, symbolize_time);
        self.metrics.set_targets(match targets {
            Target::Pids(pids) => pids.len(),
            Target::All => window
                .samples
                .iter()
                .map(|s| s.pid)
                .collect::<HashSet<_>>()
                .len(),
        });
        let accounting = window.accounting;
        self.metrics.add_window(&accounting);
        let mut comments = accounting.comments();
        comments.extend(unwind_comments);
        let profile = Profile {
            view: View::Wall,
            start: times.start,
            duration_ns: times.duration_ns,
            period_ns: config.sample_period_ns(),
            samples: window.samples,
            comments,
        };

        let step = Instant::now();
        let bytes = pprof::encode(&profile);
        let encode_time = step.elapsed();
        self.metrics.step(Step::Encode, encode_time);
        let step = Instant::now();
        let written = self.sink.write(&bytes, times.start);
        self.metrics.step(Step::Write, step.elapsed());
        self.metrics
            .window_written(written.is_ok(), self.sink.pending());
        let path = match written {
            Ok(path) => path,
            Err(e) => return Written::Deferred(e),
        };
        let counter = |name| {
            accounting
                .counters
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(0, |&(_, v)| v)
        };
        tracing::info!(
            path = %path.display(),
            entries = profile.samples.len(),
            samples = profile.samples.iter().map(|s| s.samples).sum::<u64>(),
            symbolization_failures = accounting.symbolize.failed,
            frames_by_table = counter(Stat::FramesByTable.name()),
            frames_by_frame_pointer = counter(Stat::FramesByFramePointer.name()),
            pcs_without_table = counter(Stat::PcsWithoutTable.name()),
            stacks_truncated = counter(Stat::StacksTruncated.name()),
            drain_us = drain_time.as_micros(),
            symbolize_us = symbolize_time.as_micros(),
            encode_us = encode_time.as_micros(),
            "wrote profile"
        );
        Written::Done
    }
}

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;

//! Where symbolized segments go, in the order they were drained: their
//! rows join the window and the push under way, and the segment a window
//! (or a push) ended with finishes it: the window is encoded and written,
//! the push handed to the pusher.
use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use profiler_common::stats::Stat;

use crate::{
    assemble::Accounting,
    config::Target,
    output::metrics::{Metrics, Step},
    output::pprof,
    output::push::Pusher,
    output::sink::{FileSink, SinkError},
    profile::{Profile, Sample, View, merge_samples},
};

/// How writing a finished window went. A kernel failure is an error of
/// the pipeline (fatal); a sink failure is not, since the window is kept
/// for another try.
pub enum Written {
    Done,
    /// The file could not be written; the sink keeps the window.
    Deferred(SinkError),
}

/// A segment back from the symbolizer.
pub struct Assembled {
    pub samples: Vec<Sample>,
    pub accounting: Accounting,
    /// How long its assembly took.
    pub took: Duration,
}

/// What ends with a segment.
#[derive(Default)]
pub struct Ends {
    pub window: Option<WindowEnds>,
    pub push: Option<PushEnds>,
}

/// The window a segment ends.
pub struct WindowEnds {
    pub start: SystemTime,
    pub duration_ns: u64,
    pub period_ns: u64,
    /// Time spent draining the window's chunks.
    pub drain_time: Duration,
    /// The targets at its end.
    pub targets: Target,
    pub unwind_comments: Vec<String>,
    /// The process watch's caches at its end, as gauges.
    pub levels: Vec<(&'static str, u64)>,
}

/// The push period a segment ends.
#[derive(Clone, Copy)]
pub struct PushEnds {
    pub start: SystemTime,
    pub duration_ns: u64,
    pub period_ns: u64,
}

/// Symbolized rows and their accounting: a window, or a push, so far.
#[derive(Default)]
struct Rows {
    samples: Vec<Sample>,
    accounting: Accounting,
    /// Time spent assembling them.
    symbolize_time: Duration,
}

impl Rows {
    fn add(&mut self, samples: Vec<Sample>, accounting: Accounting, took: Duration) {
        merge_samples(&mut self.samples, samples);
        self.accounting.absorb(accounting);
        self.symbolize_time += took;
    }
}

/// The rows of the window and of the push under way, and where finished
/// ones go.
pub struct Outlets {
    pub sink: FileSink,
    metrics: Arc<Metrics>,
    window: Rows,
    /// With `--push`.
    push: Option<(Pusher, Rows)>,
}

impl Outlets {
    pub fn new(sink: FileSink, metrics: Arc<Metrics>, pusher: Option<Pusher>) -> Self {
        Self {
            sink,
            metrics,
            window: Rows::default(),
            push: pusher.map(|pusher| (pusher, Rows::default())),
        }
    }

    /// Whether profiles are pushed.
    pub fn pushing(&self) -> bool {
        self.push.is_some()
    }

    /// Adds a segment's rows, then finishes what `ends` with it: returns
    /// how the window's write went if it ended one.
    pub fn absorb(&mut self, segment: Assembled, ends: Ends) -> Option<Written> {
        let Assembled {
            samples,
            accounting,
            took,
        } = segment;
        if let Some((_, rows)) = &mut self.push {
            rows.add(samples.clone(), accounting.clone(), took);
        }
        self.window.add(samples, accounting, took);
        if let Some(push) = ends.push {
            self.hand_push(push);
        }
        ends.window.map(|window| self.write_window(window))
    }

    /// Stops pushing: what is not sent within `grace` stays in the spool
    /// for the next start.
    pub fn stop_pushing(&mut self, grace: Duration) {
        if let Some((pusher, _)) = self.push.take() {
            pusher.shut_down(grace);
        }
    }

    /// Hands the push period's profile to the pusher, which sends it in
    /// the background.
    fn hand_push(&mut self, ends: PushEnds) {
        let Some((pusher, rows)) = &mut self.push else {
            return;
        };
        let rows = std::mem::take(rows);
        pusher.submit(Profile {
            view: View::Wall,
            start: ends.start,
            duration_ns: ends.duration_ns,
            period_ns: ends.period_ns,
            samples: rows.samples,
            comments: rows.accounting.comments(),
        });
    }

    /// Encodes and writes the window; the next one starts empty.
    fn write_window(&mut self, ends: WindowEnds) -> Written {
        let window = std::mem::take(&mut self.window);
        self.metrics.step(Step::Drain, ends.drain_time);
        self.metrics.step(Step::Symbolize, window.symbolize_time);
        self.metrics.set_targets(match &ends.targets {
            Target::Pids(pids) => pids.len(),
            Target::All => window
                .samples
                .iter()
                .map(|s| s.pid)
                .collect::<HashSet<_>>()
                .len(),
        });
        let mut accounting = window.accounting;
        accounting.gauges.extend(ends.levels);
        self.metrics.add_window(&accounting);
        let mut comments = accounting.comments();
        comments.extend(ends.unwind_comments);
        let profile = Profile {
            view: View::Wall,
            start: ends.start,
            duration_ns: ends.duration_ns,
            period_ns: ends.period_ns,
            samples: window.samples,
            comments,
        };

        let step = Instant::now();
        let bytes = pprof::encode(&profile);
        let encode_time = step.elapsed();
        self.metrics.step(Step::Encode, encode_time);
        let step = Instant::now();
        let written = self.sink.write(&bytes, ends.start);
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
            user_frames = counter("user_frames"),
            user_frames_resolved = counter("user_frames_resolved"),
            frames_by_table = counter(Stat::FramesByTable.name()),
            frames_by_frame_pointer = counter(Stat::FramesByFramePointer.name()),
            pcs_without_table = counter(Stat::PcsWithoutTable.name()),
            stacks_truncated = counter(Stat::StacksTruncated.name()),
            drain_us = ends.drain_time.as_micros(),
            symbolize_us = window.symbolize_time.as_micros(),
            encode_us = encode_time.as_micros(),
            "wrote profile"
        );
        Written::Done
    }
}

//! What the kernel's data passes through on its way to a file: drain a
//! chunk (flip the slots, read the old one, account the off-CPU intervals
//! still open), collect chunks into the window, then at the window's end
//! symbolize, encode and write.
use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use profiler_common::stats::Stat;
use tokio::time::sleep;

use crate::{
    bpf::{Kernel, KernelError, RawWindow, Rng},
    config::{Config, Target},
    metrics::{FilledMap, Metrics, Step},
    pprof,
    profile::View,
    sink::{FileSink, SinkError},
    symbolize::{Debuginfod, Symbolizer, debuginfod::DebuginfodError},
    window::{WindowTimes, assemble},
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
}

impl DrainReason {
    fn label(self) -> &'static str {
        match self {
            Self::Window => "window",
            Self::Request => "request",
            Self::Full => "full",
        }
    }
}

/// The fill of the samples or stacks map (of its capacity) past which the
/// window loop drains early, into the same window: with the loop checking
/// every 250 ms, the last quarter takes ~8,000 new entries a second to fill
/// before the next check (16,000 for the samples map).
pub const EARLY_DRAIN_FILL: f64 = 0.75;

/// How writing a finished window went. A kernel failure is an error of
/// the pipeline (fatal); a sink failure is not, since the window is kept
/// for another try.
pub enum Written {
    Done,
    /// The file could not be written; the sink keeps the window.
    Deferred(SinkError),
}

/// The window being collected, and what finishes it.
pub struct Pipeline {
    symbolizer: Symbolizer,
    pub sink: FileSink,
    /// The random source of the sampling rule for still-open intervals.
    rng: Rng,
    metrics: Arc<Metrics>,
    /// The chunks drained so far in this window, merged.
    window: RawWindow,
    window_start: SystemTime,
    /// The window's start on the kernel's clock; `None` until its first
    /// chunk is drained.
    window_start_ns: Option<u64>,
    /// Time spent draining this window's chunks.
    drain_time: Duration,
}

impl Pipeline {
    /// The symbolizer (with debuginfod's download thread, if configured),
    /// the sink and the sampling RNG.
    ///
    /// # Errors
    /// When debuginfod's thread cannot start.
    pub fn new(config: &Config, metrics: Arc<Metrics>) -> Result<Self, DebuginfodError> {
        let debuginfod = config
            .symbols
            .debuginfod
            .as_ref()
            .map(Debuginfod::start)
            .transpose()?;
        Ok(Self {
            symbolizer: Symbolizer::new(&config.symbols, debuginfod),
            sink: FileSink::new(config.output_dir.clone(), config.retain),
            rng: Rng::new(),
            metrics,
            window: RawWindow::default(),
            window_start: SystemTime::now(),
            window_start_ns: None,
            drain_time: Duration::ZERO,
        })
    }

    /// Ends a chunk: flips the kernel to the other slot, reads the old one
    /// and accounts the off-CPU intervals still open. Returns the chunk
    /// and its end on the kernel's clock; [`Pipeline::collect`] adds it to
    /// the window.
    ///
    /// # Errors
    /// When the kernel maps cannot be flipped, read or cleared.
    pub async fn drain_chunk(
        &mut self,
        kernel: &mut Kernel,
        config: &Config,
        targets: &Target,
        reason: DrainReason,
    ) -> Result<(RawWindow, u64), KernelError> {
        let flip = kernel.flip()?;
        self.window_start_ns.get_or_insert(flip.start_ns);
        sleep(FLIP_GRACE).await;
        let started = Instant::now();
        let mut chunk = kernel.drain(&flip)?;
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

    /// Adds a drained chunk to the window.
    pub fn collect(&mut self, chunk: RawWindow) {
        if self.window.samples.is_empty() && self.window.stats.iter().all(|&s| s == 0) {
            self.window = chunk;
        } else {
            self.window.absorb(&chunk);
        }
    }

    /// Finishes the window that ended at `end_ns` (its last chunk
    /// collected): symbolize, encode, write; the next window starts here.
    pub fn finish(
        &mut self,
        config: &Config,
        targets: &Target,
        end_ns: u64,
        unwind_comments: Vec<String>,
    ) -> Written {
        let raw = std::mem::take(&mut self.window);
        let times = WindowTimes {
            start: std::mem::replace(&mut self.window_start, SystemTime::now()),
            duration_ns: end_ns.saturating_sub(self.window_start_ns.take().unwrap_or(end_ns)),
        };
        let drain_time = std::mem::take(&mut self.drain_time);
        self.metrics.step(Step::Drain, drain_time);
        self.metrics.set_targets(match targets {
            Target::Pids(pids) => pids.len(),
            Target::All => raw
                .samples
                .iter()
                .map(|s| s.pid)
                .collect::<HashSet<_>>()
                .len(),
        });

        let step = Instant::now();
        let (mut profile, accounting) = assemble(
            &raw,
            &mut self.symbolizer,
            times,
            config.sample_period_ns(),
            View::Wall,
        );
        profile.comments.extend(unwind_comments);
        let symbolize_time = step.elapsed();
        self.metrics.step(Step::Symbolize, symbolize_time);
        self.metrics.add_window(&accounting);
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
        tracing::info!(
            path = %path.display(),
            entries = raw.samples.len(),
            samples = profile.samples.iter().map(|s| s.samples).sum::<u64>(),
            symbolization_failures = accounting.symbolize.failed,
            frames_by_table = raw.stat(Stat::FramesByTable),
            frames_by_frame_pointer = raw.stat(Stat::FramesByFramePointer),
            pcs_without_table = raw.stat(Stat::PcsWithoutTable),
            stacks_truncated = raw.stat(Stat::StacksTruncated),
            drain_us = drain_time.as_micros(),
            symbolize_us = symbolize_time.as_micros(),
            encode_us = encode_time.as_micros(),
            "wrote profile"
        );
        Written::Done
    }
}

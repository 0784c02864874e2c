//! The window loop: every interval, at the end of `--duration`, on
//! SIGINT/SIGTERM (then exit), on SIGHUP (then start a new window) and when
//! every target has exited and none is waited for (then exit), drain the
//! kernel, symbolize, encode and write one file. Between windows, targets
//! found by `--comm`/`--pid-file` are added as they appear.
use std::time::{Duration, Instant, SystemTime};

use profiler_common::stats::Stat;
use tokio::{
    signal::unix::{SignalKind, signal},
    time::{MissedTickBehavior, interval_at, sleep, sleep_until},
};

use crate::{
    bpf::{Flip, Kernel, KernelError, Rng},
    config::{Config, Target, Unwind},
    pprof,
    sink::{FileSink, SinkError},
    symbolize::{
        Symbolizer,
        debuginfod::{Debuginfod, DebuginfodError},
    },
    targets::Targets,
    unwind::Unwinder,
    window::{WindowTimes, assemble},
};

/// How often the unwinder serves the kernel's requests for mappings: a
/// process started after the daemon gets full stacks within this.
const UNWIND_POLL: Duration = Duration::from_millis(200);

/// How often targets are checked again: exits, and new `--comm` or
/// `--pid-file` matches.
const TARGET_CHECK: Duration = Duration::from_millis(500);

/// Why a window ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WindowEnd {
    Interval,
    Deadline,
    Signal(&'static str),
    /// SIGHUP: write now, keep going.
    Hangup,
    TargetsGone,
}

impl WindowEnd {
    fn is_last(self) -> bool {
        matches!(self, Self::Deadline | Self::Signal(_) | Self::TargetsGone)
    }
}

/// How long to wait after flipping slots before reading the old one: an
/// eBPF program that read the slot number just before the flip finishes
/// within microseconds.
const FLIP_GRACE: Duration = Duration::from_millis(5);

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error("installing signal handlers")]
    Signals(#[source] std::io::Error),
    #[error("final profile not written")]
    FinalWrite(#[source] SinkError),
    #[error(transparent)]
    Debuginfod(#[from] DebuginfodError),
}

/// The line tests and tools wait for: everything is attached.
fn log_start(config: &Config) {
    tracing::info!(
        target = ?config.target,
        on_cpu_hz = config.modes.on_cpu().then_some(config.frequency_hz),
        off_cpu_rate = ?config.modes.off_cpu().map(|o| Duration::from_nanos(o.rate_ns)),
        interval = ?config.interval,
        output_dir = %config.output_dir.display(),
        "profiling"
    );
}

/// Adds new `--comm`/`--pid-file` matches to the kernel's targets and
/// removes exited ones; returns whether every target is gone (and nothing
/// is waited for).
fn follow_targets(targets: &mut Targets, kernel: &mut Kernel) -> Result<bool, KernelError> {
    let (added, exited) = targets.refresh();
    for pid in added {
        kernel.add_target(pid)?;
        tracing::info!(pid, "profiling a new target");
    }
    for pid in exited {
        kernel.remove_target(pid)?;
        tracing::info!(pid, "target exited");
    }
    Ok(targets.all_gone())
}

/// Profiles until `--duration` ends, SIGINT or SIGTERM arrives, or every
/// target has exited with nothing to wait for.
///
/// # Errors
/// When loading or draining the kernel side fails, or the last window
/// cannot be written.
pub async fn run(config: Config) -> Result<(), DaemonError> {
    let mut sigint = signal(SignalKind::interrupt()).map_err(DaemonError::Signals)?;
    let mut sigterm = signal(SignalKind::terminate()).map_err(DaemonError::Signals)?;
    let mut sighup = signal(SignalKind::hangup()).map_err(DaemonError::Signals)?;

    let mut pipeline = Pipeline::new(&config)?;
    let mut targets = Targets::new(&config.target, &config.discover);
    let mut kernel = Kernel::load(&config, &targets.current())?;
    kernel.forward_logs();
    let mut unwinder = start_unwinder(&config, &targets.current(), &mut kernel)?;
    let mut unwind_poll = tokio::time::interval(UNWIND_POLL);
    log_start(&config);

    let started = Instant::now();
    let deadline = config
        .duration
        .map(|d| tokio::time::Instant::from_std(started + d));
    let mut ticker = interval_at(
        tokio::time::Instant::from_std(started + config.interval),
        config.interval,
    );
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut window_start = SystemTime::now();

    // With --pid/--comm/--pid-file: notice exits and new matches.
    let mut liveness = tokio::time::interval(TARGET_CHECK);
    let watch_targets = matches!(config.target, Target::Pids(_));

    loop {
        let end = loop {
            tokio::select! {
                _ = ticker.tick() => break WindowEnd::Interval,
                () = sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => break WindowEnd::Deadline,
                _ = sigint.recv() => break WindowEnd::Signal("SIGINT"),
                _ = sigterm.recv() => break WindowEnd::Signal("SIGTERM"),
                _ = sighup.recv() => break WindowEnd::Hangup,
                _ = unwind_poll.tick(), if unwinder.is_some() => {
                    serve_unwinder(unwinder.as_mut(), &mut kernel)?;
                }
                _ = liveness.tick(), if watch_targets => {
                    if follow_targets(&mut targets, &mut kernel)? {
                        break WindowEnd::TargetsGone;
                    }
                }
            }
        };
        // A tick that lands on the deadline ends the run too, rather than
        // leaving an empty window after it.
        let last = end.is_last() || deadline.is_some_and(|d| tokio::time::Instant::now() >= d);
        log_end(end);
        if end == WindowEnd::Hangup {
            ticker.reset();
        }

        let flip = kernel.flip()?;
        let times = WindowTimes {
            start: window_start,
            duration_ns: flip.end_ns - flip.start_ns,
        };
        window_start = SystemTime::now();
        sleep(FLIP_GRACE).await;

        // Stacks of processes that appeared since the last poll are walked
        // by table from here on; serve them before the window's drain.
        let unwind_comments = serve_unwinder(unwinder.as_mut(), &mut kernel)?;
        match pipeline.finish(
            &mut kernel,
            &config,
            &targets.current(),
            &flip,
            times,
            unwind_comments,
        )? {
            Written::Done => {}
            Written::Deferred(e) if last => return Err(DaemonError::FinalWrite(e)),
            Written::Deferred(e) => tracing::error!(
                waiting = pipeline.sink.pending(),
                "{}; keeping on sampling, will try again with the next window",
                crate::error_chain(&e)
            ),
        }
        if last {
            return Ok(());
        }
    }
}

fn log_end(end: WindowEnd) {
    match end {
        WindowEnd::Signal(name) => tracing::info!("{name}: writing the last window"),
        WindowEnd::Hangup => {
            tracing::info!("SIGHUP: writing the current window, starting a new one");
        }
        WindowEnd::TargetsGone => {
            tracing::info!("every target has exited: writing the last window");
        }
        WindowEnd::Interval | WindowEnd::Deadline => {}
    }
}

/// Serves the kernel's requests for tables; returns the unwinder's
/// counters as profile comments (none without an unwinder).
fn serve_unwinder(
    unwinder: Option<&mut Unwinder>,
    kernel: &mut Kernel,
) -> Result<Vec<String>, KernelError> {
    let Some(unwinder) = unwinder else {
        return Ok(Vec::new());
    };
    unwinder.serve(kernel)?;
    Ok(unwinder.stats().comments())
}

/// The unwinder, with the `--pid` targets' tables already in the kernel so
/// their first samples are walked by table; none with `--unwind
/// frame-pointer`.
fn start_unwinder(
    config: &Config,
    targets: &Target,
    kernel: &mut Kernel,
) -> Result<Option<Unwinder>, KernelError> {
    let Unwind::Tables { rows } = config.unwind else {
        return Ok(None);
    };
    let mut unwinder = Unwinder::new(rows);
    if let Target::Pids(pids) = targets {
        for &pid in pids {
            unwinder.publish(kernel, pid)?;
        }
    }
    Ok(Some(unwinder))
}

/// What a window passes through once the kernel has flipped: drain,
/// symbolize, encode, write.
struct Pipeline {
    symbolizer: Symbolizer,
    sink: FileSink,
    /// The random source of the sampling rule for still-open intervals.
    rng: Rng,
}

/// How writing a finished window went. A kernel failure is an error of
/// [`Pipeline::finish`] (fatal); a sink failure is not, since the window
/// is kept for another try.
enum Written {
    Done,
    /// The file could not be written; the sink keeps the window.
    Deferred(SinkError),
}

impl Pipeline {
    /// The symbolizer (with debuginfod's download thread, if configured),
    /// the sink and the sampling RNG.
    fn new(config: &Config) -> Result<Self, DaemonError> {
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
        })
    }

    /// Finishes the window of `flip`: drain, symbolize, encode, write.
    fn finish(
        &mut self,
        kernel: &mut Kernel,
        config: &Config,
        targets: &Target,
        flip: &Flip,
        times: WindowTimes,
        unwind_comments: Vec<String>,
    ) -> Result<Written, KernelError> {
        let drain_started = Instant::now();
        let mut raw = kernel.drain(flip)?;
        if let Some(rule) = config.modes.off_cpu() {
            let (open, stats) = kernel.account_in_flight(flip, rule, targets, &mut self.rng)?;
            raw.samples.extend(open);
            raw.in_flight = stats;
        }
        let drain_us = drain_started.elapsed().as_micros();
        let step = Instant::now();
        let (mut profile, sym_stats) =
            assemble(&raw, &mut self.symbolizer, times, config.sample_period_ns());
        profile.comments.extend(unwind_comments);
        let symbolize_us = step.elapsed().as_micros();
        let step = Instant::now();
        let bytes = pprof::encode(&profile);
        let encode_us = step.elapsed().as_micros();
        let path = match self.sink.write(&bytes, times.start) {
            Ok(path) => path,
            Err(e) => return Ok(Written::Deferred(e)),
        };
        tracing::info!(
            path = %path.display(),
            entries = raw.samples.len(),
            samples = profile.samples.iter().map(|s| s.samples).sum::<u64>(),
            symbolization_failures = sym_stats.failed,
            frames_by_table = raw.stat(Stat::FramesByTable),
            frames_by_frame_pointer = raw.stat(Stat::FramesByFramePointer),
            pcs_without_table = raw.stat(Stat::PcsWithoutTable),
            stacks_truncated = raw.stat(Stat::StacksTruncated),
            drain_us,
            symbolize_us,
            encode_us,
            total_us = drain_started.elapsed().as_micros(),
            "wrote profile"
        );
        Ok(Written::Done)
    }
}

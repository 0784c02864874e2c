//! The window loop: every interval, at the end of `--duration`, on
//! SIGINT/SIGTERM (then exit), on SIGHUP (then start a new window) and when
//! every target has exited and none is waited for (then exit), drain the
//! kernel, symbolize, encode and write one file. The kernel is also
//! drained, into the same window, when an on-demand profile starts or ends
//! (`on_demand`), and, with `--push`, every `--push-interval`, when the
//! pipeline hands what it symbolized since the last push to the pusher.
//! Between drains, targets found by `--comm`/`--pid-file` are added as
//! they appear.
use std::{sync::Arc, time::Duration};

use tokio::{
    signal::unix::{Signal, SignalKind, signal},
    sync::mpsc,
    time::{Instant, Interval, MissedTickBehavior, interval_at, sleep_until},
};

use crate::{
    assembler::{Assembler, AssemblerError},
    bpf::{Kernel, KernelError, TargetMaps, WindowMaps},
    config::{Config, Target},
    goroutines::GoroutineSampler,
    http::{self, HttpError},
    metrics::Metrics,
    on_demand::{OnDemand, ProfileRequest},
    pipeline::{DrainReason, EARLY_DRAIN_FILL, Pipeline, Written},
    process_watch::ProcessWatch,
    push::{PushError, Pusher},
    sink::SinkError,
    targets::Targets,
};

/// How often the kernel's requests for mappings are served: a process
/// started after the daemon gets full stacks within this, and its
/// mappings are read for the symbolizer.
const UNWIND_POLL: Duration = Duration::from_millis(200);

/// How often targets are checked again: exits, and new `--comm` or
/// `--pid-file` matches.
const TARGET_CHECK: Duration = Duration::from_millis(500);

/// How long the last pushes may take at exit before they are left in the
/// spool for the next start.
const PUSH_GRACE: Duration = Duration::from_secs(3);

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

/// How often the kernel maps' fill is checked (see `EARLY_DRAIN_FILL`).
const FILL_CHECK: Duration = Duration::from_millis(250);

/// What ends a chunk: the window's end, an on-demand profile's start or
/// end, or a kernel map filling up.
enum Event {
    WindowEnd(WindowEnd),
    Request(ProfileRequest),
    RequestsDue,
    MapsFilling,
    PushDue,
}

impl Event {
    fn drain_reason(&self) -> DrainReason {
        match self {
            Self::WindowEnd(_) => DrainReason::Window,
            Self::Request(_) | Self::RequestsDue => DrainReason::Request,
            Self::MapsFilling => DrainReason::Full,
            Self::PushDue => DrainReason::Push,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error("installing signal handlers")]
    Signals(#[source] std::io::Error),
    #[error("final profile not written")]
    FinalWrite(#[source] SinkError),
    #[error(transparent)]
    Symbolizer(#[from] AssemblerError),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error(transparent)]
    Push(#[from] PushError),
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
fn follow_targets(
    targets: &mut Targets,
    kernel: &mut impl TargetMaps,
) -> Result<bool, KernelError> {
    let in_kernel = kernel.target_pids()?;
    let (added, exited) = targets.refresh(&in_kernel);
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
    let signals = Signals::install()?;
    let metrics = Arc::new(Metrics::new());
    let pusher = config
        .push
        .as_ref()
        .map(|push| Pusher::start(push, &metrics.push))
        .transpose()?;
    let (assembler, symbolizer) = Assembler::start(&config.symbols)?;
    let (mut requests, mut on_demand) = start_http(&config, &metrics, &assembler)?;
    let mut pipeline = Pipeline::new(&config, metrics, pusher, assembler);
    let mut targets = Targets::new(&config.target, &config.discover);
    let mut kernel = Kernel::load(&config, &targets.current())?;
    kernel.forward_logs();
    let record_mappings = config.target == Target::All || !config.discover.comms.is_empty();
    let mut watch = ProcessWatch::start(
        config.unwind,
        &targets.current(),
        record_mappings,
        &mut kernel,
    )?;
    let goroutines = config
        .goroutine_hz
        .map(|hz| GoroutineSampler::start(hz, &targets.current()));
    log_start(&config);
    let mut waits = Waits::start(&config, signals);

    loop {
        let event = waits
            .next_event(
                &mut kernel,
                &mut watch,
                &mut targets,
                requests.as_mut(),
                on_demand.as_ref(),
            )
            .await?;
        let current = targets.current();
        // Processes that appeared since the last poll: their mappings
        // belong with this chunk's samples.
        watch.serve(&mut kernel)?;
        let (mut chunk, end_ns) = pipeline
            .drain_chunk(&mut kernel, &config, &current, event.drain_reason())
            .await?;
        chunk.processes = watch.take_snapshots();
        (chunk.recorded, chunk.record_stats) = watch.take_recorded();
        if let Some(goroutines) = &goroutines {
            let taken = goroutines.take();
            chunk.samples.extend(taken.samples);
            (chunk.go_pids, chunk.goroutine_stats) = (taken.pids, taken.stats);
            goroutines.set_target(&current);
        }
        if let Some(on_demand) = on_demand.as_mut() {
            on_demand.add_chunk(&chunk, end_ns);
        }
        pipeline.collect(chunk);
        let end = match event {
            Event::WindowEnd(end) => end,
            Event::Request(request) => {
                if let Some(on_demand) = on_demand.as_mut() {
                    on_demand.start(request, end_ns);
                }
                continue;
            }
            Event::PushDue => {
                pipeline.push(&config, end_ns);
                continue;
            }
            Event::RequestsDue | Event::MapsFilling => continue,
        };
        // A tick that lands on the deadline ends the run too, rather than
        // leaving an empty window after it.
        let last = end.is_last() || waits.past_deadline();
        log_end(end);
        if end == WindowEnd::Hangup {
            waits.ticker.reset();
        }
        let written = pipeline.finish(&config, &current, end_ns, watch.comments());
        if last {
            pipeline.push(&config, end_ns);
            pipeline.stop_pushing(PUSH_GRACE);
        }
        written_or_kept(written, last, &pipeline)?;
        if last {
            // The helper threads end before the programs are detached, so
            // that no thread of ours exits while the kernel takes them out.
            drop(goroutines);
            drop((pipeline, on_demand));
            symbolizer.join();
            drop(watch);
            drop(kernel);
            return Ok(());
        }
    }
}

/// A window's write: done, or kept in memory to be tried again with the
/// next window, unless it was the last (then the run fails).
fn written_or_kept(written: Written, last: bool, pipeline: &Pipeline) -> Result<(), DaemonError> {
    match written {
        Written::Done => Ok(()),
        Written::Deferred(e) if last => Err(DaemonError::FinalWrite(e)),
        Written::Deferred(e) => {
            tracing::error!(
                waiting = pipeline.sink.pending(),
                "{}; keeping on sampling, will try again with the next window",
                crate::error_chain(&e)
            );
            Ok(())
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP, caught from before the kernel side loads.
struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl Signals {
    fn install() -> Result<Self, DaemonError> {
        let catch = |kind| signal(kind).map_err(DaemonError::Signals);
        Ok(Self {
            interrupt: catch(SignalKind::interrupt())?,
            terminate: catch(SignalKind::terminate())?,
            hangup: catch(SignalKind::hangup())?,
        })
    }
}

/// What the loop waits on between drains: the window ticker and the
/// deadline, the signals, and the periodic chores (serving mapping
/// requests, following targets, checking the maps' fill).
struct Waits {
    started: Instant,
    deadline: Option<Instant>,
    ticker: Interval,
    signals: Signals,
    unwind_poll: Interval,
    /// With --pid/--comm/--pid-file: notice exits and new matches.
    liveness: Option<Interval>,
    fill_check: Interval,
    /// With --push: the next push is due.
    push: Option<Interval>,
}

impl Waits {
    /// The first window starts now.
    fn start(config: &Config, signals: Signals) -> Self {
        let started = Instant::now();
        let mut ticker = interval_at(started + config.interval, config.interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Self {
            started,
            deadline: config.duration.map(|d| started + d),
            ticker,
            signals,
            unwind_poll: tokio::time::interval(UNWIND_POLL),
            liveness: matches!(config.target, Target::Pids(_))
                .then(|| tokio::time::interval(TARGET_CHECK)),
            fill_check: tokio::time::interval(FILL_CHECK),
            push: config.push.as_ref().map(|push| {
                let mut ticker = interval_at(started + push.interval, push.interval);
                ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
                ticker
            }),
        }
    }

    fn past_deadline(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Does the chores as they fall due until something ends the chunk.
    async fn next_event(
        &mut self,
        kernel: &mut Kernel,
        watch: &mut ProcessWatch,
        targets: &mut Targets,
        mut requests: Option<&mut mpsc::Receiver<ProfileRequest>>,
        on_demand: Option<&OnDemand>,
    ) -> Result<Event, DaemonError> {
        let due = on_demand.and_then(OnDemand::next_due);
        let never = self.started;
        loop {
            tokio::select! {
                _ = self.ticker.tick() => return Ok(Event::WindowEnd(WindowEnd::Interval)),
                () = sleep_until(self.deadline.unwrap_or(never)), if self.deadline.is_some() => {
                    return Ok(Event::WindowEnd(WindowEnd::Deadline));
                }
                _ = self.signals.interrupt.recv() => return Ok(Event::WindowEnd(WindowEnd::Signal("SIGINT"))),
                _ = self.signals.terminate.recv() => return Ok(Event::WindowEnd(WindowEnd::Signal("SIGTERM"))),
                _ = self.signals.hangup.recv() => return Ok(Event::WindowEnd(WindowEnd::Hangup)),
                Some(request) = next_request(requests.as_deref_mut()) => return Ok(Event::Request(request)),
                () = sleep_until(due.unwrap_or(never)), if due.is_some() => return Ok(Event::RequestsDue),
                _ = self.unwind_poll.tick() => watch.serve(kernel)?,
                () = tick(self.push.as_mut()) => return Ok(Event::PushDue),
                () = tick(self.liveness.as_mut()) => {
                    if follow_targets(targets, kernel)? {
                        return Ok(Event::WindowEnd(WindowEnd::TargetsGone));
                    }
                }
                _ = self.fill_check.tick() => {
                    if maps_filling(kernel)? {
                        return Ok(Event::MapsFilling);
                    }
                }
            }
        }
    }
}

/// The next tick of `interval`; never, without one.
async fn tick(interval: Option<&mut Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// The HTTP endpoints and the on-demand profiles behind them, with
/// `--listen`; `(None, None)` without.
fn start_http(
    config: &Config,
    metrics: &Arc<Metrics>,
    assembler: &Assembler,
) -> Result<(Option<mpsc::Receiver<ProfileRequest>>, Option<OnDemand>), DaemonError> {
    let Some(addr) = config.listen else {
        return Ok((None, None));
    };
    let requests = http::start(addr, metrics.clone(), config.modes)?;
    let on_demand = OnDemand::new(assembler.clone(), config.sample_period_ns());
    tracing::info!(%addr, "serving /debug/pprof/{{profile,offcpu,wall}} and /metrics");
    Ok((Some(requests), Some(on_demand)))
}

/// Whether the samples or stacks map of the active slot is past
/// [`EARLY_DRAIN_FILL`].
fn maps_filling(kernel: &impl WindowMaps) -> Result<bool, KernelError> {
    let (samples, stacks) = kernel.active_entries()?.fill();
    Ok(samples.max(stacks) >= EARLY_DRAIN_FILL)
}

/// The next profile request; never, without `--listen`.
async fn next_request(
    requests: Option<&mut mpsc::Receiver<ProfileRequest>>,
) -> Option<ProfileRequest> {
    match requests {
        Some(requests) => requests.recv().await,
        None => std::future::pending().await,
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

#[cfg(test)]
#[path = "daemon_tests.rs"]
mod tests;

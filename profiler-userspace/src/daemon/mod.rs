//! The window loop: every interval, at the end of `--duration`, on
//! SIGINT/SIGTERM (then exit), on SIGHUP (then start a new window) and when
//! every target has exited and none is waited for (then exit), drain the
//! kernel and write one file, once the symbolizer's thread has it (the
//! loop goes on meanwhile, and waits only for the last). The kernel is also
//! drained, into the same window, when an on-demand profile starts or ends
//! (`on_demand`), and, with `--push`, every `--push-interval`, when the
//! pipeline hands what it symbolized since the last push to the pusher.
//! Between drains, targets found by `--comm`/`--pid-file` are added as
//! they appear.
//!
//! `run` sets up the daemon's parts and shuts them down in order;
//! [`Daemon`] is the loop over them, whose kernel is anything that
//! implements [`KernelMaps`] (the loaded programs, or the in-memory maps of
//! its tests); `waits.rs` is what it waits on between drains.
mod error;
mod waits;

use std::{sync::Arc, time::Duration};

use tokio::sync::mpsc;

use crate::{
    bpf::{Doorbell, Kernel, KernelMaps},
    config::{Config, Target},
    output::{
        http,
        metrics::Metrics,
        on_demand::{OnDemand, ProfileRequest},
        push::Pusher,
    },
    pipeline::{Assembled, DrainReason, Pipeline, Written},
    process::roots,
    process_watch::ProcessWatch,
    runtimes::Runtimes,
    symbolizer_thread::{Assembler, AssemblerThread},
    targets::Targets,
};
pub use error::DaemonError;
use waits::{Chores, Event, Signals, Waits, WindowEnd, Woken};

/// How long the last pushes may take at exit before they are left in the
/// spool for the next start.
const PUSH_GRACE: Duration = Duration::from_secs(3);

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
    let (assembler, symbolizer) = Assembler::start(&config.symbols, config.what_if.clone())?;
    let http = start_http(&config, &metrics, &assembler)?;
    let pipeline = Pipeline::new(&config, metrics, pusher, assembler);
    let targets = Targets::new(&config.target, &config.discover);
    let mut kernel = Kernel::load(&config, &targets.current(), roots::ours_as_seen())?;
    kernel.forward_logs();
    let doorbell = kernel.doorbell()?;
    let mut daemon = Daemon::new(
        &config,
        kernel,
        targets,
        pipeline,
        http,
        (signals, doorbell),
    )?;
    log_start(&config);
    let result = daemon.run_windows().await;
    daemon.shut_down(symbolizer);
    result
}

/// The HTTP side, with `--listen`: the requests it hands over, and the
/// on-demand profiles under way.
type Http = (Option<mpsc::Receiver<ProfileRequest>>, Option<OnDemand>);

/// The daemon's parts while it runs.
struct Daemon<'a, K> {
    config: &'a Config,
    kernel: K,
    watch: ProcessWatch,
    targets: Targets,
    pipeline: Pipeline,
    requests: Option<mpsc::Receiver<ProfileRequest>>,
    on_demand: Option<OnDemand>,
    runtimes: Runtimes,
    waits: Waits,
}

impl<'a, K: KernelMaps> Daemon<'a, K> {
    /// Starts the watch on processes' mappings (publishing the `--pid`
    /// targets' tables), the language runtimes (the goroutine view with
    /// `--goroutine-frequency`),
    /// and the first window, woken by `signals` and the kernel's `doorbell`
    /// (none in tests).
    fn new(
        config: &'a Config,
        mut kernel: K,
        targets: Targets,
        pipeline: Pipeline,
        (requests, on_demand): Http,
        (signals, doorbell): (Signals, Option<Doorbell>),
    ) -> Result<Self, DaemonError> {
        let record_mappings = config.target == Target::All || !config.discover.comms.is_empty();
        let mut watch = ProcessWatch::start(
            config.unwind,
            &targets.current(),
            (record_mappings, config.goroutine_wakers),
            &mut kernel,
        )?;
        crate::allocator::give_back_freed();
        let go_wakes = config.goroutine_wakers.then(|| kernel.go_wakes()).flatten();
        let runtimes = Runtimes::start(config.goroutine_hz, go_wakes, &targets.current());
        // A process's runtime is looked at as soon as the kernel asks for
        // its mappings, not after the unwind tables of that request are
        // built: a large binary's took 0.7 s, which a Go program's
        // goroutine view lost.
        let noticer = runtimes.noticer();
        watch.on_requests(move |pids| noticer(pids));
        Ok(Self {
            config,
            kernel,
            watch,
            targets,
            pipeline,
            requests,
            on_demand,
            runtimes,
            waits: Waits::start(config, signals, doorbell),
        })
    }

    /// Ends chunks and windows until the last window is written.
    async fn run_windows(&mut self) -> Result<(), DaemonError> {
        loop {
            let chores = Chores {
                kernel: &mut self.kernel,
                watch: &mut self.watch,
                targets: &mut self.targets,
                requests: self.requests.as_mut(),
                on_demand: self.on_demand.as_ref(),
                runtimes: &self.runtimes,
                pipeline: &mut self.pipeline,
            };
            let event = match self.waits.next_event(chores).await? {
                Woken::Drain(event) => event,
                Woken::Assembled(segment) => {
                    self.absorb(*segment, false)?;
                    continue;
                }
            };
            let end_ns = self.end_chunk(event.drain_reason()).await?;
            let end = match event {
                Event::WindowEnd(end) => end,
                Event::Request(request) => {
                    if let Some(on_demand) = self.on_demand.as_mut() {
                        on_demand.start(request, end_ns);
                    }
                    continue;
                }
                Event::PushDue => {
                    self.pipeline.push(self.config, end_ns);
                    continue;
                }
                Event::RequestsDue | Event::MapsFilling => continue,
            };
            if self.end_window(end, end_ns).await? {
                return Ok(());
            }
        }
    }

    /// Drains a chunk, attaches what the watch and the runtimes
    /// gathered meanwhile, and hands it to the on-demand profiles and the
    /// pipeline; returns its end on the kernel's clock.
    async fn end_chunk(&mut self, reason: DrainReason) -> Result<u64, DaemonError> {
        let current = self.targets.current();
        // Processes that appeared since the last poll: their mappings
        // belong with this chunk's samples.
        self.watch.serve(&mut self.kernel)?;
        let (mut chunk, end_ns) = self
            .pipeline
            .drain_chunk(&mut self.kernel, self.config, &current, reason)
            .await?;
        chunk.add_processes(self.watch.take_snapshots(), self.watch.take_recorded());
        // Code objects first recorded up to the drain are named with it.
        self.watch.serve_python(&mut self.kernel)?;
        chunk.add_python_codes(self.watch.take_python_codes());
        chunk.add_java_names(self.watch.name_java(chunk.samples()));
        self.watch.label_go(chunk.samples_mut());
        let (rows, facts) = self.runtimes.take();
        chunk.add_runtimes(rows, facts);
        self.runtimes.set_target(&current);
        let chunk = chunk.finish();
        if let Some(on_demand) = self.on_demand.as_mut() {
            on_demand.add_chunk(&chunk, end_ns);
        }
        self.pipeline.collect(chunk);
        Ok(end_ns)
    }

    /// Ends the window that `end` ended: the symbolizer has its last
    /// segment, and the loop writes it when that is back. The last window
    /// (and the last push) is waited for here. Returns whether it was the
    /// last.
    async fn end_window(&mut self, end: WindowEnd, end_ns: u64) -> Result<bool, DaemonError> {
        // A tick that lands on the deadline ends the run too, rather than
        // leaving an empty window after it.
        let last = end.is_last() || self.waits.past_deadline();
        log_end(end);
        if end == WindowEnd::Hangup {
            self.waits.restart_window();
        }
        let current = self.targets.current();
        let comments = self.watch.comments();
        let levels = self.watch.levels();
        self.watch.new_window();
        if last {
            self.pipeline.push(self.config, end_ns);
        }
        self.pipeline
            .finish(self.config, &current, end_ns, comments, levels);
        if last {
            while self.pipeline.waiting() {
                let segment = self.pipeline.next_assembled().await;
                self.absorb(segment, true)?;
            }
            self.pipeline.stop_pushing(PUSH_GRACE);
        }
        Ok(last)
    }

    /// Hands a segment back from the symbolizer to the pipeline; a window
    /// it finished is written or kept for another try, unless it is the
    /// last of the run (`ending`, with nothing after it), which must be
    /// written.
    fn absorb(&mut self, segment: Assembled, ending: bool) -> Result<(), DaemonError> {
        let Some(written) = self.pipeline.absorb(segment) else {
            return Ok(());
        };
        let last = ending && !self.pipeline.waiting();
        written_or_kept(written, last, &self.pipeline)
    }

    /// Ends the helper threads before the programs are detached, so that
    /// no thread of ours exits while the kernel takes them out.
    fn shut_down(self, symbolizer: AssemblerThread) {
        let Self {
            kernel,
            watch,
            pipeline,
            on_demand,
            runtimes,
            ..
        } = self;
        drop(runtimes);
        drop((pipeline, on_demand));
        symbolizer.join();
        drop(watch);
        drop(kernel);
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
                waiting = pipeline.files_waiting(),
                "{}; keeping on sampling, will try again with the next window",
                crate::error_chain(&e)
            );
            Ok(())
        }
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
mod tests;

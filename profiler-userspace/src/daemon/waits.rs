//! What the window loop waits on between drains: the window's ticker and
//! the deadline, the signals, HTTP requests, and the chores done
//! meanwhile (serving mapping requests as the kernel rings, following
//! targets, checking the maps' fill), any of which can end the chunk.
use std::time::Duration;

use tokio::{
    signal::unix::{Signal, SignalKind, signal},
    sync::mpsc,
    time::{Instant, Interval, MissedTickBehavior, interval_at, sleep_until},
};

use super::error::DaemonError;
use crate::{
    bpf::{Doorbell, KernelError, KernelMaps, Rang, TargetMaps, WindowMaps},
    config::{Config, Target},
    output::on_demand::{OnDemand, ProfileRequest},
    pipeline::{Assembled, DrainReason, EARLY_DRAIN_FILL, Pipeline},
    process_watch::ProcessWatch,
    runtimes::Runtimes,
    targets::Targets,
};

/// How often the kernel's requests for mappings are served whether or
/// not it rang (its doorbell rings once per new request; this catches
/// any a full ring lost), exited processes are forgotten, and the kernel
/// maps' fill is checked (see `EARLY_DRAIN_FILL`): one wakeup for all.
const POLL: Duration = Duration::from_millis(200);

/// How often targets are checked again: exits, and new `--comm` or
/// `--pid-file` matches.
const TARGET_CHECK: Duration = Duration::from_millis(500);

/// Why a window ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WindowEnd {
    Interval,
    Deadline,
    Signal(&'static str),
    /// SIGHUP: write now, keep going.
    Hangup,
    TargetsGone,
}

impl WindowEnd {
    pub(super) fn is_last(self) -> bool {
        matches!(self, Self::Deadline | Self::Signal(_) | Self::TargetsGone)
    }
}

/// What wakes the loop: something that ends a chunk, or a segment back
/// from the symbolizer, which ends none.
pub(super) enum Woken {
    Drain(Event),
    Assembled(Box<Assembled>),
}

impl From<Event> for Woken {
    fn from(event: Event) -> Self {
        Self::Drain(event)
    }
}

/// What ends a chunk: the window's end, an on-demand profile's start or
/// end, a kernel map filling up, or a push falling due.
pub(super) enum Event {
    WindowEnd(WindowEnd),
    Request(ProfileRequest),
    RequestsDue,
    MapsFilling,
    PushDue,
}

impl Event {
    /// Why the event drains a chunk.
    pub(super) fn drain_reason(&self) -> DrainReason {
        match self {
            Self::WindowEnd(_) => DrainReason::Window,
            Self::Request(_) | Self::RequestsDue => DrainReason::Request,
            Self::MapsFilling => DrainReason::Full,
            Self::PushDue => DrainReason::Push,
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP, caught from before the kernel side loads.
pub(super) struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl Signals {
    pub(super) fn install() -> Result<Self, DaemonError> {
        let catch = |kind| signal(kind).map_err(DaemonError::Signals);
        Ok(Self {
            interrupt: catch(SignalKind::interrupt())?,
            terminate: catch(SignalKind::terminate())?,
            hangup: catch(SignalKind::hangup())?,
        })
    }
}

/// The timers and signals the loop waits on.
pub(super) struct Waits {
    started: Instant,
    deadline: Option<Instant>,
    ticker: Interval,
    signals: Signals,
    /// Rung by the kernel when it asks for a process's mappings.
    doorbell: Option<Doorbell>,
    poll: Interval,
    /// With --pid/--comm/--pid-file: notice exits and new matches.
    liveness: Option<Interval>,
    /// With --push: the next push is due.
    push: Option<Interval>,
}

/// What the chores work on, borrowed from the daemon for one wait.
pub(super) struct Chores<'a, K> {
    pub kernel: &'a mut K,
    pub watch: &'a mut ProcessWatch,
    pub targets: &'a mut Targets,
    pub requests: Option<&'a mut mpsc::Receiver<ProfileRequest>>,
    pub on_demand: Option<&'a OnDemand>,
    pub runtimes: &'a Runtimes,
    /// Whose segments come back from the symbolizer meanwhile.
    pub pipeline: &'a mut Pipeline,
}

impl Waits {
    /// The first window starts now.
    pub(super) fn start(config: &Config, signals: Signals, doorbell: Option<Doorbell>) -> Self {
        let started = Instant::now();
        let mut ticker = interval_at(started + config.interval, config.interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Self {
            started,
            deadline: config.duration.map(|d| started + d),
            ticker,
            signals,
            doorbell,
            poll: tokio::time::interval(POLL),
            liveness: matches!(config.target, Target::Pids(_))
                .then(|| tokio::time::interval(TARGET_CHECK)),
            push: config.push.as_ref().map(|push| {
                let mut ticker = interval_at(started + push.interval, push.interval);
                ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
                ticker
            }),
        }
    }

    pub(super) fn past_deadline(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// SIGHUP ended a window early: the next one is a whole interval.
    pub(super) fn restart_window(&mut self) {
        self.ticker.reset();
    }

    /// Does the chores as they fall due until something ends the chunk.
    pub(super) async fn next_event<K: KernelMaps>(
        &mut self,
        chores: Chores<'_, K>,
    ) -> Result<Woken, DaemonError> {
        let Chores {
            kernel,
            watch,
            targets,
            mut requests,
            on_demand,
            runtimes,
            pipeline,
        } = chores;
        let due = on_demand.and_then(OnDemand::next_due);
        let never = self.started;
        loop {
            tokio::select! {
                _ = self.ticker.tick() => return Ok(Event::WindowEnd(WindowEnd::Interval).into()),
                () = sleep_until(self.deadline.unwrap_or(never)), if self.deadline.is_some() => {
                    return Ok(Event::WindowEnd(WindowEnd::Deadline).into());
                }
                _ = self.signals.interrupt.recv() => return Ok(Event::WindowEnd(WindowEnd::Signal("SIGINT")).into()),
                _ = self.signals.terminate.recv() => return Ok(Event::WindowEnd(WindowEnd::Signal("SIGTERM")).into()),
                _ = self.signals.hangup.recv() => return Ok(Event::WindowEnd(WindowEnd::Hangup).into()),
                Some(request) = next_request(requests.as_deref_mut()) => return Ok(Event::Request(request).into()),
                () = sleep_until(due.unwrap_or(never)), if due.is_some() => return Ok(Event::RequestsDue.into()),
                segment = pipeline.next_assembled() => return Ok(Woken::Assembled(Box::new(segment))),
                rung = ring(self.doorbell.as_mut()) => {
                    watch.serve_rung(kernel, rung?)?;
                    if targets.kernel_adopts() {
                        adopt_targets(targets, kernel, runtimes)?;
                    }
                }
                _ = self.poll.tick() => {
                    watch.serve(kernel)?;
                    if maps_filling(kernel)? {
                        return Ok(Event::MapsFilling.into());
                    }
                }
                () = tick(self.push.as_mut()) => return Ok(Event::PushDue.into()),
                () = tick(self.liveness.as_mut()) => {
                    let followed = follow_targets(targets, kernel)?;
                    if followed.changed {
                        // The runtimes read the new targets from now, not
                        // from the chunk's end (a window later).
                        runtimes.set_target(&targets.current());
                        runtimes.notice(&followed.added);
                    }
                    if followed.all_gone {
                        return Ok(Event::WindowEnd(WindowEnd::TargetsGone).into());
                    }
                }
            }
        }
    }
}

/// What following the targets found.
struct Followed {
    /// Processes that became targets.
    added: Vec<u32>,
    /// Whether any target came or went.
    changed: bool,
    /// Every target is gone, and nothing is waited for.
    all_gone: bool,
}

/// Follows the processes the kernel made targets at their exec (a
/// `--comm` match), found when their first request rings rather than at
/// the next [`TARGET_CHECK`], up to 500 ms later: a Go program's
/// goroutine view starts then (the runtimes look at their targets only).
fn adopt_targets(
    targets: &mut Targets,
    kernel: &mut impl TargetMaps,
    runtimes: &Runtimes,
) -> Result<(), KernelError> {
    let added = targets.adopt(&kernel.target_pids()?);
    if !added.is_empty() {
        for &pid in &added {
            tracing::info!(pid, "profiling a new target");
        }
        runtimes.set_target(&targets.current());
        runtimes.notice(&added);
    }
    Ok(())
}

/// Adds new `--comm`/`--pid-file` matches to the kernel's targets and
/// removes exited ones.
fn follow_targets(
    targets: &mut Targets,
    kernel: &mut impl TargetMaps,
) -> Result<Followed, KernelError> {
    let in_kernel = kernel.target_pids()?;
    let (added, exited) = targets.refresh(&in_kernel);
    for &pid in &added {
        kernel.add_target(pid)?;
        tracing::info!(pid, "profiling a new target");
    }
    for &pid in &exited {
        kernel.remove_target(pid)?;
        tracing::info!(pid, "target exited");
    }
    Ok(Followed {
        changed: !added.is_empty() || !exited.is_empty(),
        added,
        all_gone: targets.all_gone(),
    })
}

/// Whether the samples or stacks map of the active slot is past
/// [`EARLY_DRAIN_FILL`].
fn maps_filling(kernel: &impl WindowMaps) -> Result<bool, KernelError> {
    let (samples, stacks) = kernel.active_entries()?.fill();
    Ok(samples.max(stacks) >= EARLY_DRAIN_FILL)
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

/// The kernel's next ring; never, without a doorbell.
async fn ring(doorbell: Option<&mut Doorbell>) -> Result<Rang, KernelError> {
    match doorbell {
        Some(doorbell) => doorbell.rung().await,
        None => std::future::pending().await,
    }
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

#[cfg(test)]
mod tests;

//! The daemon's own health in the Prometheus text format, served at
//! `/metrics` (`http`). Updated by the window loop; read by the HTTP
//! thread, so every metric is an atomic shared through [`Metrics`].
use std::{
    sync::{Arc, atomic::AtomicU64},
    time::Duration,
};

use prometheus_client::{
    encoding::text::encode,
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

use crate::{assemble::Accounting, cpu_time};

type Labels = Vec<(&'static str, &'static str)>;

/// A step of finishing a window, timed in `profiler_window_step_seconds`.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    Drain,
    Symbolize,
    Encode,
    Write,
}

impl Step {
    fn label(self) -> &'static str {
        match self {
            Self::Drain => "drain",
            Self::Symbolize => "symbolize",
            Self::Encode => "encode",
            Self::Write => "write",
        }
    }
}

/// A kernel map whose fill level is exported.
#[derive(Clone, Copy, Debug)]
pub enum FilledMap {
    Samples,
    Stacks,
}

impl FilledMap {
    fn label(self) -> &'static str {
        match self {
            Self::Samples => "samples",
            Self::Stacks => "stacks",
        }
    }
}

fn step_histogram() -> Histogram {
    // 0.5 ms .. ~16 s.
    Histogram::new(exponential_buckets(0.000_5, 2.0, 16))
}

/// Every metric the daemon exports.
pub struct Metrics {
    registry: Registry,
    window_counters: Family<Labels, Counter>,
    window_gauges: Family<Labels, Gauge>,
    step_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    windows_written: Counter,
    window_write_failures: Counter,
    windows_waiting: Gauge,
    targets: Gauge,
    map_fill: Family<Labels, Gauge<f64, AtomicU64>>,
    drains: Family<Labels, Counter>,
    http_profiles: Family<Labels, Counter>,
    /// The daemon's CPU by step (`cpu_time.rs`), brought up to date when
    /// rendered.
    cpu_seconds: Family<Labels, Counter<f64, AtomicU64>>,
    /// The last window's critical-path ends (`--wakers`).
    critical_path_top: Family<OwnedLabels, Gauge<f64, AtomicU64>>,
    /// What the pusher reports (the push thread updates it).
    pub push: Arc<PushMetrics>,
}

/// Labels with a value known only at run time (an endpoint's URL).
type OwnedLabels = Vec<(&'static str, String)>;

/// The pushes to each backend (label `endpoint`, the `--push` URL).
#[derive(Debug, Default)]
pub struct PushMetrics {
    sent: Family<OwnedLabels, Counter>,
    bytes: Family<OwnedLabels, Counter>,
    failures: Family<OwnedLabels, Counter>,
    spool_requests: Family<OwnedLabels, Gauge>,
    spool_bytes: Family<OwnedLabels, Gauge>,
    spool_age: Family<OwnedLabels, Gauge<f64, AtomicU64>>,
}

impl PushMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "push_requests",
            "Push requests a backend accepted (label `endpoint`)",
            self.sent.clone(),
        );
        registry.register(
            "push_bytes",
            "Bytes of the push requests a backend accepted",
            self.bytes.clone(),
        );
        registry.register(
            "push_failures",
            "Push requests that failed, by `cause`: connect, timeout, server_error, transport (tried again), rejected (a 4xx: dropped), spool_full (the oldest dropped), spool_io",
            self.failures.clone(),
        );
        registry.register(
            "push_spool_requests",
            "Push requests waiting in a backend's spool",
            self.spool_requests.clone(),
        );
        registry.register(
            "push_spool_bytes",
            "Bytes waiting in a backend's spool",
            self.spool_bytes.clone(),
        );
        registry.register(
            "push_spool_oldest_age_seconds",
            "How long the oldest push in a backend's spool has waited",
            self.spool_age.clone(),
        );
    }

    fn endpoint(endpoint: &str) -> OwnedLabels {
        vec![("endpoint", endpoint.to_owned())]
    }

    /// A request of `bytes` accepted by `endpoint`.
    pub fn sent(&self, endpoint: &str, bytes: u64) {
        let labels = Self::endpoint(endpoint);
        self.sent.get_or_create(&labels).inc();
        self.bytes.get_or_create(&labels).inc_by(bytes);
    }

    /// A request to `endpoint` failed for `cause`.
    pub fn failed(&self, endpoint: &str, cause: &'static str) {
        let mut labels = Self::endpoint(endpoint);
        labels.push(("cause", cause.to_owned()));
        self.failures.get_or_create(&labels).inc();
    }

    /// The spool of `endpoint` now.
    pub fn spool(&self, endpoint: &str, requests: usize, bytes: u64, oldest: Duration) {
        let labels = Self::endpoint(endpoint);
        let level = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.spool_requests
            .get_or_create(&labels)
            .set(level(requests as u64));
        self.spool_bytes.get_or_create(&labels).set(level(bytes));
        self.spool_age
            .get_or_create(&labels)
            .set(oldest.as_secs_f64());
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric under the `profiler_` prefix.
    #[must_use]
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("profiler");
        let metrics = Self {
            registry: Registry::default(),
            window_counters: Family::default(),
            window_gauges: Family::default(),
            step_seconds: Family::new_with_constructor(step_histogram),
            windows_written: Counter::default(),
            window_write_failures: Counter::default(),
            windows_waiting: Gauge::default(),
            targets: Gauge::default(),
            map_fill: Family::default(),
            drains: Family::default(),
            http_profiles: Family::default(),
            cpu_seconds: Family::default(),
            critical_path_top: Family::default(),
            push: Arc::default(),
        };
        metrics.push.register(&mut registry);
        registry.register(
            "window_events",
            "Per-window counters, as in each profile's comments (label `counter`)",
            metrics.window_counters.clone(),
        );
        registry.register(
            "window_level",
            "Levels at the last window's end, as in its comments (label `gauge`)",
            metrics.window_gauges.clone(),
        );
        registry.register(
            "window_step_seconds",
            "Time to drain, symbolize, encode and write one window",
            metrics.step_seconds.clone(),
        );
        registry.register(
            "windows_written",
            "Profile files written",
            metrics.windows_written.clone(),
        );
        registry.register(
            "window_write_failures",
            "Profile file writes that failed (the window is kept and tried again)",
            metrics.window_write_failures.clone(),
        );
        registry.register(
            "windows_waiting",
            "Windows kept in memory because their file could not be written",
            metrics.windows_waiting.clone(),
        );
        registry.register(
            "targets",
            "Processes profiled: the targets, or with --all those seen in the last window",
            metrics.targets.clone(),
        );
        registry.register(
            "map_fill_ratio",
            "Fill of a kernel map when last drained, 0 to 1 (label `map`)",
            metrics.map_fill.clone(),
        );
        registry.register(
            "drains",
            "Kernel map drains, by reason (label `reason`)",
            metrics.drains.clone(),
        );
        registry.register(
            "http_profiles",
            "Profiles served over HTTP (label `endpoint`)",
            metrics.http_profiles.clone(),
        );
        registry.register(
            "cpu_seconds",
            "The daemon's CPU time by step of its work (label `step`; the rest is the \
             process's CPU less their sum)",
            metrics.cpu_seconds.clone(),
        );
        registry.register(
            "critical_path_top_seconds",
            "With --wakers: the last window's blocked time by what it ultimately waited \
             for, its five largest ends (label `end`: a thread's code as NAME:TID, or a \
             marker such as [woken by disk])",
            metrics.critical_path_top.clone(),
        );
        Self {
            registry,
            ..metrics
        }
    }

    /// The text exposition (OpenMetrics, which Prometheus reads).
    #[must_use]
    pub fn render(&self) -> String {
        for (step, ns) in cpu_time::totals() {
            let counter = self.cpu_seconds.get_or_create(&vec![("step", step.name())]);
            #[expect(clippy::cast_precision_loss, reason = "seconds")]
            let total = ns as f64 / 1e9;
            counter.inc_by((total - counter.get()).max(0.0));
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }

    /// Adds a finished window's counters and sets its levels.
    pub fn add_window(&self, accounting: &Accounting) {
        for &(name, value) in &accounting.counters {
            self.window_counters
                .get_or_create(&vec![("counter", name)])
                .inc_by(value);
        }
        for &(name, value) in &accounting.gauges {
            self.window_gauges
                .get_or_create(&vec![("gauge", name)])
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        }
        self.critical_path_top.clear();
        for (end, ns) in accounting.critical_top() {
            #[expect(clippy::cast_precision_loss, reason = "seconds")]
            self.critical_path_top
                .get_or_create(&vec![("end", end.to_owned())])
                .set(ns as f64 / 1e9);
        }
    }

    pub fn step(&self, step: Step, took: Duration) {
        self.step_seconds
            .get_or_create(&vec![("step", step.label())])
            .observe(took.as_secs_f64());
    }

    /// A file written (`true`) or not; `waiting` windows are kept.
    pub fn window_written(&self, ok: bool, waiting: usize) {
        if ok {
            self.windows_written.inc();
        } else {
            self.window_write_failures.inc();
        }
        self.windows_waiting
            .set(i64::try_from(waiting).unwrap_or(i64::MAX));
    }

    pub fn set_targets(&self, targets: usize) {
        self.targets.set(i64::try_from(targets).unwrap_or(i64::MAX));
    }

    pub fn set_map_fill(&self, map: FilledMap, ratio: f64) {
        self.map_fill
            .get_or_create(&vec![("map", map.label())])
            .set(ratio);
    }

    /// A drain of the kernel maps, and why (`window`, `request`, `full`).
    pub fn drained(&self, reason: &'static str) {
        self.drains.get_or_create(&vec![("reason", reason)]).inc();
    }

    /// A profile served at `endpoint` (`profile`, `offcpu`, `wall`).
    pub fn http_profile(&self, endpoint: &'static str) {
        self.http_profiles
            .get_or_create(&vec![("endpoint", endpoint)])
            .inc();
    }
}

#[cfg(test)]
mod tests;

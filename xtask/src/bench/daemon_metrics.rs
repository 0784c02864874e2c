//! The daemon's own numbers, read as an operator reads them: `/metrics`
//! over loopback (the same counters as each profile's comments, and the
//! time of each step of finishing a window), not its log.
use std::net::TcpListener;

use anyhow::{Context as _, bail};
use profiler_fixtures::{
    http,
    openmetrics::{self, Value},
};

/// Where a profiler started with [`Metrics::args`] serves `/metrics`.
pub(super) struct Metrics {
    port: String,
}

impl Metrics {
    /// A free loopback port for the next profiler.
    pub(super) fn new() -> anyhow::Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        Ok(Self {
            port: port.to_string(),
        })
    }

    /// The profiler flags that serve it.
    pub(super) fn args(&self) -> [&str; 2] {
        ["--listen", &self.port]
    }

    /// Waits (up to 30 s) until the daemon has written its first window:
    /// past its cold start (its first tables, `/proc/kallsyms`).
    pub(super) fn wait_first_window(&self) -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while self.scrape()?.windows_written()? < 1.0 {
            if std::time::Instant::now() > deadline {
                bail!("the daemon wrote no window in 30 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        Ok(())
    }

    /// Ends the window of the daemon `pid` now (SIGHUP) and waits (up to
    /// 30 s) until it is written: every sample taken before is then
    /// symbolized, and its cost counted.
    pub(super) fn end_window(&self, pid: u32) -> anyhow::Result<()> {
        let written = self.scrape()?.windows_written()?;
        crate::workspace::hang_up(pid)?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while self.scrape()?.windows_written()? <= written {
            if std::time::Instant::now() > deadline {
                bail!("the daemon wrote no window in 30 s after SIGHUP");
            }
            // A scrape costs the daemon about 0.4 ms.
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Ok(())
    }

    /// `GET /metrics` now.
    pub(super) fn scrape(&self) -> anyhow::Result<Scrape> {
        let url = format!("http://127.0.0.1:{}/metrics", self.port);
        let (status, body) = http::get(&url)?;
        if status != 200 {
            bail!("{url}: HTTP {status}");
        }
        Ok(Scrape(
            String::from_utf8(body).context("/metrics is not UTF-8")?,
        ))
    }
}

/// One `/metrics` text.
pub(super) struct Scrape(String);

impl Scrape {
    fn value(&self, family: &str, label: (&str, &str)) -> anyhow::Result<Value> {
        openmetrics::value(&self.0, family, Some(label))
            .map_err(|e| anyhow::anyhow!("{e} in:\n{}", self.0))
    }

    /// A per-window counter (`profiler_window_events{counter=name}`),
    /// summed over every window so far.
    pub(super) fn counter(&self, name: &str) -> anyhow::Result<f64> {
        Ok(self
            .value("profiler_window_events", ("counter", name))?
            .number())
    }

    /// The per-window counters `names`, summed, per on-CPU sample (0
    /// without samples).
    pub(super) fn per_on_cpu_sample(&self, names: &[&str]) -> anyhow::Result<f64> {
        let stacks = self.counter("on_cpu_samples")?;
        let mut sum = 0.0;
        for name in names {
            sum += self.counter(name)?;
        }
        Ok(if stacks > 0.0 { sum / stacks } else { 0.0 })
    }

    /// Native frames (walked by table or by frame pointer) per on-CPU
    /// sample.
    pub(super) fn native_frames_per_sample(&self) -> anyhow::Result<f64> {
        self.per_on_cpu_sample(&["frames_by_table", "frames_by_frame_pointer"])
    }

    /// The windows written so far (`profiler_windows_written_total`).
    fn windows_written(&self) -> anyhow::Result<f64> {
        openmetrics::value(&self.0, "profiler_windows_written", None)
            .map(Value::number)
            .map_err(|e| anyhow::anyhow!("{e} in:\n{}", self.0))
    }

    /// The daemon's CPU seconds so far in `step` of its work
    /// (`profiler_cpu_seconds_total{step}`).
    pub(super) fn cpu_seconds(&self, step: &str) -> anyhow::Result<f64> {
        Ok(self.value("profiler_cpu_seconds", ("step", step))?.number())
    }

    /// The windows that went through `step` (`drain`, `symbolize`,
    /// `encode`, `write`) and their total time in milliseconds.
    pub(super) fn step(&self, step: &str) -> anyhow::Result<(f64, f64)> {
        match self.value("profiler_window_step_seconds", ("step", step))? {
            Value::Histogram { count, sum } => Ok((count, sum * 1000.0)),
            Value::Number(_) => bail!("profiler_window_step_seconds is not a histogram"),
        }
    }

    /// The mean milliseconds per window of `step`.
    pub(super) fn mean_step_ms(&self, step: &str) -> anyhow::Result<f64> {
        let (count, sum_ms) = self.step(step)?;
        if count == 0.0 {
            bail!("no window went through {step}");
        }
        Ok(sum_ms / count)
    }
}

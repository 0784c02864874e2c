//! Command-line flags → a validated [`Config`]. The only module that sees clap.
use std::{ffi::OsString, path::PathBuf, time::Duration};

use clap::{ArgGroup, CommandFactory as _, Parser, error::ErrorKind};

use crate::config::{Config, Target};

/// Where the kernel's sampling-rate ceiling is published.
pub const MAX_SAMPLE_RATE_PATH: &str = "/proc/sys/kernel/perf_event_max_sample_rate";

/// System-wide on-CPU profiler: samples stacks with eBPF and writes a gzip'd
/// pprof file every interval.
#[derive(Debug, Parser)]
#[command(name = "profiler", version, about)]
#[command(group(ArgGroup::new("target").required(true).args(["pids", "all"])))]
struct Args {
    /// Profile this process and all its threads (repeatable).
    #[arg(long = "pid", value_name = "PID")]
    pids: Vec<u32>,

    /// Profile every process on the system.
    #[arg(long, conflicts_with = "pids")]
    all: bool,

    /// Directory for the profile files (created if missing).
    #[arg(long, value_name = "DIR", default_value = "/var/lib/profiler")]
    output_dir: PathBuf,

    /// Length of one profile window, e.g. 500ms, 10s, 1m.
    #[arg(long, value_name = "DUR", default_value = "60s", value_parser = parse_duration)]
    interval: Duration,

    /// Stop after this long (default: run until SIGINT/SIGTERM).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    duration: Option<Duration>,

    /// On-CPU samples per second on each CPU.
    #[arg(long, value_name = "HZ", default_value_t = 99)]
    frequency: u64,

    /// Keep only the newest N profile files.
    #[arg(long, value_name = "N", default_value_t = 100)]
    retain: usize,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (expected e.g. 500ms, 10s, 1m)"))
}

/// Limits of the running kernel that flag values are checked against.
#[derive(Clone, Copy, Debug)]
pub struct KernelLimits {
    /// `kernel.perf_event_max_sample_rate`.
    pub max_sample_rate: u64,
}

impl KernelLimits {
    /// Reads the limits from procfs. A missing file means no perf events,
    /// which loading will report; here it imposes no ceiling.
    #[must_use]
    pub fn read() -> Self {
        let max_sample_rate = std::fs::read_to_string(MAX_SAMPLE_RATE_PATH)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(u64::MAX);
        Self { max_sample_rate }
    }
}

/// Parses and validates `args` (including the program name).
///
/// # Errors
/// A clap error, ready to print with [`clap::Error::exit`], for an unknown
/// or malformed flag and for values the daemon cannot run with.
pub fn parse<I, T>(args: I, limits: KernelLimits) -> Result<Config, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args = Args::try_parse_from(args)?;
    let invalid = |msg: String| Args::command().error(ErrorKind::ValueValidation, msg);

    if args.frequency == 0 {
        return Err(invalid("--frequency must be at least 1 Hz".into()));
    }
    if args.frequency > limits.max_sample_rate {
        return Err(invalid(format!(
            "--frequency {} exceeds the kernel's limit of {} Hz ({MAX_SAMPLE_RATE_PATH})",
            args.frequency, limits.max_sample_rate
        )));
    }
    if args.interval.is_zero() {
        return Err(invalid("--interval must be longer than 0".into()));
    }
    if args.duration.is_some_and(|d| d.is_zero()) {
        return Err(invalid("--duration must be longer than 0".into()));
    }
    if args.retain == 0 {
        return Err(invalid("--retain must keep at least 1 file".into()));
    }
    if let Some(&pid) = args.pids.iter().find(|&&pid| pid == 0) {
        return Err(invalid(format!("--pid {pid}: not a process id")));
    }

    let target = if args.all {
        Target::All
    } else {
        let mut pids = args.pids;
        pids.sort_unstable();
        pids.dedup();
        Target::Pids(pids)
    };
    Ok(Config {
        target,
        output_dir: args.output_dir,
        interval: args.interval,
        duration: args.duration,
        frequency_hz: args.frequency,
        retain: args.retain,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: KernelLimits = KernelLimits {
        max_sample_rate: 1000,
    };

    fn parse_ok(args: &[&str]) -> Config {
        parse(
            std::iter::once("profiler").chain(args.iter().copied()),
            LIMITS,
        )
        .unwrap_or_else(|e| panic!("{args:?} rejected: {e}"))
    }

    fn parse_err(args: &[&str]) -> clap::Error {
        match parse(
            std::iter::once("profiler").chain(args.iter().copied()),
            LIMITS,
        ) {
            Ok(config) => panic!("{args:?} accepted as {config:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn defaults() {
        let config = parse_ok(&["--pid", "42"]);
        assert_eq!(config.target, Target::Pids(vec![42]));
        assert_eq!(config.output_dir, PathBuf::from("/var/lib/profiler"));
        assert_eq!(config.interval, Duration::from_mins(1));
        assert_eq!(config.duration, None);
        assert_eq!(config.frequency_hz, 99);
        assert_eq!(config.retain, 100);
    }

    #[test]
    fn durations_and_repeated_pids() {
        let config = parse_ok(&[
            "--pid",
            "7",
            "--pid",
            "3",
            "--pid",
            "7",
            "--interval",
            "500ms",
            "--duration",
            "1m",
            "--frequency",
            "1000",
            "--retain",
            "3",
            "--output-dir",
            "/tmp/x",
        ]);
        assert_eq!(config.target, Target::Pids(vec![3, 7]));
        assert_eq!(config.interval, Duration::from_millis(500));
        assert_eq!(config.duration, Some(Duration::from_mins(1)));
        assert_eq!(config.sample_period_ns(), 1_000_000);
        assert_eq!(config.retain, 3);
    }

    #[test]
    fn all_mode() {
        assert_eq!(parse_ok(&["--all"]).target, Target::All);
    }

    #[test]
    fn target_is_required_and_exclusive() {
        assert_eq!(parse_err(&[]).kind(), ErrorKind::MissingRequiredArgument);
        assert_eq!(
            parse_err(&["--all", "--pid", "1"]).kind(),
            ErrorKind::ArgumentConflict
        );
    }

    #[test]
    fn bad_values() {
        for (args, needle) in [
            (&["--pid", "1", "--frequency", "0"][..], "at least 1 Hz"),
            (
                &["--pid", "1", "--frequency", "1001"][..],
                "exceeds the kernel's limit of 1000",
            ),
            (&["--pid", "1", "--interval", "0s"][..], "--interval"),
            (&["--pid", "1", "--duration", "0s"][..], "--duration"),
            (&["--pid", "1", "--retain", "0"][..], "--retain"),
            (&["--pid", "0"][..], "not a process id"),
        ] {
            let err = parse_err(args);
            assert_eq!(err.kind(), ErrorKind::ValueValidation, "{args:?}");
            assert!(err.to_string().contains(needle), "{args:?}: {err}");
        }
    }

    #[test]
    fn malformed_flags() {
        assert_eq!(
            parse_err(&["--pid", "x"]).kind(),
            ErrorKind::ValueValidation
        );
        assert!(
            parse_err(&["--pid", "1", "--interval", "soon"])
                .to_string()
                .contains("10s")
        );
        assert_eq!(
            parse_err(&["--pid", "1", "--bogus"]).kind(),
            ErrorKind::UnknownArgument
        );
    }
}

//! What the root-free tests of the pipeline, the daemon and on-demand
//! profiles share: a configuration from flags, rows as the kernel records
//! them, and the profiles they write, decoded.
use std::{ffi::OsString, io::Read as _, path::Path, sync::Arc};

use profiler_common::sample::ThreadState;
use prost::Message as _;

use crate::{
    cli::{self, KernelLimits},
    config::Config,
    output::pprof::proto,
    sample::{RawSample, Stack},
};

/// No process has this pid: its stacks stay addresses.
pub const NO_PID: u32 = 4_000_000;

/// The configuration `flags` give, writing to `dir`.
pub fn config(dir: &Path, flags: &[&str]) -> Config {
    let args = std::iter::once("profiler")
        .chain(flags.iter().copied())
        .chain(["--output-dir"])
        .map(OsString::from)
        .chain([dir.as_os_str().to_owned()]);
    cli::parse(
        args,
        KernelLimits {
            max_sample_rate: 1000,
        },
    )
    .unwrap()
}

/// A row of thread `tid` of [`NO_PID`], with a two-frame user stack.
pub fn row(tid: u32, state: ThreadState, samples: u64, off_cpu_ns: u64) -> RawSample {
    RawSample {
        pid: NO_PID,
        tid,
        thread: "worker".into(),
        state,
        user_stack: Stack::Frames(Arc::from([0x40_1000, 0x40_2000])),
        kernel_stack: Stack::Absent,
        samples,
        off_cpu_ns,
        off_cpu_count: u64::from(off_cpu_ns > 0),
        labels: None,
        runtime_ns: 0,
        label_set: None,
        thread_attrs: None,
        woken_by: None,
    }
}

/// How many distinct sample rows fill the samples map to the early-drain
/// threshold (three quarters of it).
pub fn early_drain_rows() -> u32 {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "three quarters of 32,768"
    )]
    let rows = (f64::from(profiler_common::maps::SAMPLES_MAX_ENTRIES)
        * crate::pipeline::EARLY_DRAIN_FILL) as u32;
    rows
}

/// A gzip'd profile, decoded.
pub fn decode(gzipped: &[u8]) -> proto::Profile {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(gzipped)
        .read_to_end(&mut bytes)
        .unwrap();
    proto::Profile::decode(&bytes[..]).unwrap()
}

/// The profiles written to `dir`, oldest window first.
pub fn written(dir: &Path) -> Vec<proto::Profile> {
    let mut profiles: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".pb.gz"))
        .map(|p| decode(&std::fs::read(p).unwrap()))
        .collect();
    profiles.sort_by_key(|p| p.time_nanos);
    profiles
}

/// Sum of sample type `name` over the profile.
pub fn total(p: &proto::Profile, name: &str) -> i64 {
    let i = p
        .sample_type
        .iter()
        .position(|t| p.string_table[usize::try_from(t.r#type).unwrap()] == name)
        .unwrap();
    p.sample.iter().map(|s| s.value[i]).sum()
}

/// The value of the profile's comment `name=N`.
pub fn comment(p: &proto::Profile, name: &str) -> Option<u64> {
    p.comment.iter().find_map(|&c| {
        p.string_table[usize::try_from(c).unwrap()]
            .strip_prefix(name)?
            .strip_prefix('=')?
            .parse()
            .ok()
    })
}

/// Builds the Go program `source` (a `main` package's text) in `dir` as
/// `name` with Debian's Go (`go`, which `.ci/run` installs) and `args`
/// (`-ldflags=-s -w`, `-buildmode=pie`); returns the binary's path.
pub fn go_build(dir: &Path, source: &str, name: &str, args: &[&str]) -> std::path::PathBuf {
    let main = dir.join(format!("{name}.go"));
    std::fs::write(&main, source).unwrap();
    let bin = dir.join(name);
    let status = std::process::Command::new("go")
        .arg("build")
        .args(args)
        .arg("-o")
        .arg(&bin)
        .arg(&main)
        .current_dir(dir)
        .env("GOCACHE", dir.join("cache"))
        .env("GOPATH", dir.join("gopath"))
        .status()
        .expect("go (.ci/run installs it)");
    assert!(status.success(), "go build {name}");
    bin
}

//! Helpers of the real-kernel tests: fixture processes, running the real
//! `profiler` binary, and reading back the pprof files it wrote.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::{
    collections::HashMap,
    fs,
    io::{BufRead as _, BufReader, Read as _},
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Output, Stdio},
};

use profiler_userspace::pprof::proto;
use prost::Message as _;

/// The `profiler` binary under test.
pub fn profiler() -> Command {
    Command::new(env!("CARGO_BIN_EXE_profiler"))
}

/// Panics unless running as root: these tests must run, never skip.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "real-kernel tests load BPF and need root; run `cargo xtask test` as root"
    );
}

/// A fixture program from profiler-fixtures, built next to the profiler.
pub struct Fixture {
    child: Child,
    stdout: BufReader<ChildStdout>,
    pub pid: u32,
    pub tid: u32,
}

impl Fixture {
    pub fn spawn(name: &str, seconds: f64) -> Self {
        let bin = Path::new(env!("CARGO_BIN_EXE_profiler")).with_file_name(name);
        assert!(
            bin.exists(),
            "{} is missing: build it with `cargo build -p profiler-fixtures` (cargo xtask test does)",
            bin.display()
        );
        let mut child = Command::new(&bin)
            .arg(seconds.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn fixture");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("fixture ready line");
        let fields = fields(&line);
        Self {
            child,
            stdout,
            pid: fields["pid"],
            tid: fields["tid"],
        }
    }

    /// Waits for the fixture to finish and returns its measured truth.
    pub fn finish(mut self) -> HashMap<String, u64> {
        let mut rest = String::new();
        self.stdout
            .read_to_string(&mut rest)
            .expect("fixture output");
        assert!(self.child.wait().expect("wait").success(), "fixture failed");
        fields(&rest)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `key=value` pairs of whitespace-separated text (the word before them ignored).
fn fields<T: std::str::FromStr>(text: &str) -> HashMap<String, T>
where
    T::Err: std::fmt::Debug,
{
    text.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.parse().expect("numeric field")))
        .collect()
}

/// Runs the profiler to completion and returns its output.
pub fn run(args: &[&str]) -> Output {
    profiler().args(args).output().expect("run profiler")
}

/// Runs the profiler, which must succeed.
pub fn run_ok(args: &[&str]) -> Output {
    let out = run(args);
    assert!(
        out.status.success(),
        "profiler {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The profile files in `dir`, oldest first, decoded.
pub fn profiles(dir: &Path) -> Vec<(PathBuf, Profile)> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .expect("output dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            assert!(
                name.starts_with("profile-") && name.ends_with(".pb.gz"),
                "unexpected file {name} in the output dir"
            );
            let mut bytes = Vec::new();
            flate2::read::GzDecoder::new(fs::File::open(&path).unwrap())
                .read_to_end(&mut bytes)
                .expect("gzip");
            let profile = Profile(proto::Profile::decode(&bytes[..]).expect("pprof protobuf"));
            (path, profile)
        })
        .collect()
}

/// A decoded pprof with lookups by name.
pub struct Profile(pub proto::Profile);

impl Profile {
    pub fn string(&self, index: i64) -> &str {
        &self.0.string_table[usize::try_from(index).unwrap()]
    }

    /// (type, unit) of each sample value.
    pub fn sample_types(&self) -> Vec<(&str, &str)> {
        self.0
            .sample_type
            .iter()
            .map(|t| (self.string(t.r#type), self.string(t.unit)))
            .collect()
    }

    /// Index of the sample value named `ty`.
    pub fn value_index(&self, ty: &str) -> usize {
        self.0
            .sample_type
            .iter()
            .position(|t| self.string(t.r#type) == ty)
            .unwrap_or_else(|| panic!("no sample type {ty}"))
    }

    /// The numeric label `key` of `sample`.
    pub fn num_label(&self, sample: &proto::Sample, key: &str) -> Option<i64> {
        sample
            .label
            .iter()
            .find(|l| self.string(l.key) == key)
            .map(|l| l.num)
    }

    /// The string label `key` of `sample`.
    pub fn str_label(&self, sample: &proto::Sample, key: &str) -> Option<&str> {
        sample
            .label
            .iter()
            .find(|l| self.string(l.key) == key)
            .map(|l| self.string(l.str))
    }

    /// Function names of `sample`'s stack, leaf first, inlined frames included.
    pub fn functions(&self, sample: &proto::Sample) -> Vec<&str> {
        let mut names = Vec::new();
        for &id in &sample.location_id {
            let location = &self.0.location[usize::try_from(id - 1).unwrap()];
            assert_eq!(location.id, id, "location ids are dense and ordered");
            for line in &location.line {
                let function = &self.0.function[usize::try_from(line.function_id - 1).unwrap()];
                names.push(self.string(function.name));
            }
        }
        names
    }

    /// Samples whose `pid` label is `pid`.
    pub fn samples_of(&self, pid: u32) -> impl Iterator<Item = &proto::Sample> {
        self.0
            .sample
            .iter()
            .filter(move |s| self.num_label(s, "pid") == Some(i64::from(pid)))
    }

    /// The accounting comments, as text.
    pub fn comments(&self) -> Vec<&str> {
        self.0.comment.iter().map(|&c| self.string(c)).collect()
    }
}

/// Runs `go tool pprof -raw` on `path`: it must accept the file.
pub fn go_pprof_raw(path: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(path)
        .output()
        .expect("`go` not found: install Debian's golang-go (.ci/run does)");
    assert!(
        out.status.success(),
        "go tool pprof -raw {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

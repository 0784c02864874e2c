//! Real-kernel tests of `--listen`: profiles on demand, read as a user
//! reads them (`go tool pprof` on the URL, `curl`), `/metrics` parsed by an
//! OpenMetrics parser, and bad requests.
//!
//! The fixture is `natural.c` at plain `cc -O2`: thread `cpu` spins
//! without pause, so it has ~99 on-CPU samples a second of the CPU time
//! the kernel's schedstat gives it (the ground truth the checks below
//! use; on a busy machine that is less than wall time), thread `block` is
//! off the CPU nearly always.
mod support;

use std::{
    fs,
    net::TcpListener,
    path::{Path, PathBuf},
    process::Command,
    thread,
    time::Duration,
};

use support::{
    Fixture, Profile, Profiler, build, free_port, get, go_pprof_raw, metric, profiles,
    require_root,
    schedstat::{Spinner, Spun},
    sum,
};

/// On-CPU samples a second at the default frequency.
const HZ: f64 = 99.0;

/// Checks `samples` of a spinning thread against 99 Hz of what it `spun`.
///
/// Which thread a CPU's sampling tick finds is a draw weighted by CPU
/// time, so the count is about binomial with mean `HZ * cpu_seconds` and
/// a variance of at most that mean. The bound is 3.5 standard deviations,
/// and never under 10%: at the ~200-300 samples of a 3 s request that is
/// 20-25%, while a request that held a window of the wrong length (2 s
/// or 5 s of data for a 3 s request), or files whose samples a request
/// took away, are off by a third or more.
///
/// The floor is taken from the thread's CPU time, the ceiling from the
/// time it was current, which also holds what the hypervisor stole from
/// its vCPU ([`Spun::current`]): a fresh-clone CI run of `short_lived.rs`
/// sampled a 0.5 s spin 49 times while its CPU clock read 0.384 s.
#[expect(clippy::cast_precision_loss, reason = "sample counts")]
fn assert_hz(samples: i64, spun: &Spun, what: &str) {
    let (on_cpu, current) = (HZ * spun.on_cpu, HZ * spun.current);
    let tolerance = (3.5 / on_cpu.sqrt()).max(0.1);
    let samples = samples as f64;
    assert!(
        samples >= on_cpu * (1.0 - tolerance) && samples <= current * (1.0 + tolerance),
        "{samples} samples of the spinning thread in {what}, {:.3} s on a CPU, {:.3} s \
         current (expected ~{on_cpu:.0} to {current:.0} +-{:.0}%)",
        spun.on_cpu,
        spun.current,
        tolerance * 100.0
    );
}

fn decode(gzipped: &[u8], scratch: &Path, name: &str) -> Profile {
    let path = scratch.join(name);
    fs::write(&path, gzipped).unwrap();
    go_pprof_raw(&path);
    support::read_profile(&path)
}

struct Setup {
    _dir: tempfile::TempDir,
    scratch: PathBuf,
    out: PathBuf,
    fixture: Fixture,
}

/// `natural` built at plain -O2, running for `seconds` (measuring from
/// "go").
fn setup(seconds: f64) -> Setup {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::c_program("natural", dir.path());
    let mut fixture = Fixture::spawn_path(&bin, seconds);
    fixture.go();
    Setup {
        scratch: dir.path().to_owned(),
        out: dir.path().join("profiles"),
        _dir: dir,
        fixture,
    }
}

impl Setup {
    /// The profiler of the fixture with `--listen` on a free port and
    /// `interval` windows, plus `extra`; returns it and the port.
    fn listen(&self, interval: &str, extra: &[&str]) -> (Profiler, String) {
        let port = free_port().to_string();
        let pid = self.fixture.pid().to_string();
        let out = self.out.to_str().unwrap();
        let mut args = vec![
            "--pid",
            &pid,
            "--output-dir",
            out,
            "--interval",
            interval,
            "--listen",
            &port,
        ];
        args.extend_from_slice(extra);
        (Profiler::start(&args), port)
    }
}

/// Three requests at once, each for a different view and length, while
/// the periodic files go on. Each request holds its own seconds of data:
/// the `cpu` thread's samples match 99 Hz of its CPU time during the
/// request (a request that held another length would be off by a third
/// or more). The periodic files still hold every sample (a request that
/// took its chunks away from the window would leave them a third short)
/// and keep their 3 s cadence.
#[test]
#[expect(clippy::cast_precision_loss, reason = "sample counts, ns and seconds")]
fn profiles_on_demand_while_files_are_written() {
    let setup = setup(14.0);
    let (pid, spinner) = (setup.fixture.pid(), setup.fixture.tid("cpu"));
    let (mut profiler, port) = setup.listen("3s", &[]);
    let before_files = Spinner::read(pid, spinner);
    profiler.wait_for_files(&setup.out, 1);

    let base = format!("http://127.0.0.1:{port}/debug/pprof");
    let (scratch, wall_url) = (setup.scratch.clone(), format!("{base}/wall?seconds=2"));
    // As a user would: go tool pprof reads the URL itself.
    let wall = thread::spawn(move || {
        let out = Command::new("go")
            .args(["tool", "pprof", "-raw", &wall_url])
            .env("PPROF_TMPDIR", &scratch)
            .output()
            .unwrap();
        assert!(out.status.success(), "go tool pprof {wall_url}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    let cpu_url = format!("{base}/profile?seconds=3");
    let before_request = Spinner::read(pid, spinner);
    let cpu = thread::spawn(move || get(&cpu_url));
    let off = get(&format!("{base}/offcpu?seconds=2"));
    let wall = wall.join().unwrap();
    let cpu = cpu.join().unwrap();
    // A few ms more than the request's own CPU time: it is read around it.
    let spun = before_request.since();

    // Not read_phase: one fresh-clone CI run's 2 s wall profile had the
    // pipe read's ~2 ms waits (317 events) but no read_phase frame above
    // them (noted in issue 15 for a look at that walk); the others always
    // appear.
    for function in ["spin", "cpu_heavy", "sleep_phase", "lock_phase"] {
        assert!(wall.contains(function), "{function} not in:\n{wall}");
    }

    assert_eq!(cpu.0, 200, "{}", String::from_utf8_lossy(&cpu.1));
    let cpu = decode(&cpu.1, &setup.scratch, "cpu.pb.gz");
    assert_eq!(cpu.string(cpu.0.default_sample_type), "cpu");
    let seconds = cpu.0.duration_nanos as f64 / 1e9;
    assert!(
        (2.9..3.5).contains(&seconds),
        "a 3 s request lasted {seconds} s"
    );
    assert!(
        cpu.0.sample.iter().all(|s| cpu.value(s, "samples") > 0),
        "only on-CPU rows in /profile"
    );
    let spins = sum(&[(PathBuf::new(), cpu)], "samples", |p, s| {
        p.is_thread(s, spinner)
    });
    // Two CPUs shared with go tool pprof and the daemon: the spinner must
    // get a third of one at least, or the comparison below tests little.
    assert!(
        spun.on_cpu >= seconds / 3.0,
        "the spinning thread ran {} s of a {seconds} s request",
        spun.on_cpu
    );
    assert_hz(spins, &spun, &format!("a {seconds:.3} s request"));

    assert_eq!(off.0, 200, "{}", String::from_utf8_lossy(&off.1));
    let off = decode(&off.1, &setup.scratch, "off.pb.gz");
    assert_eq!(off.string(off.0.default_sample_type), "off_cpu");
    let blocker = setup.fixture.tid("block");
    let off_duration_ns = off.0.duration_nanos;
    let blocked_ns = sum(&[(PathBuf::new(), off)], "off_cpu", |p, s| {
        p.is_thread(s, blocker)
    });
    // Nearly always blocked, never more than the request's 2 s (plus the
    // few ms the drain takes): time from before the request would exceed it.
    assert!(
        (1.2e9..2.3e9).contains(&(blocked_ns as f64)),
        "block thread off the CPU {blocked_ns} ns in a 2 s request (its profile: {off_duration_ns} ns)"
    );

    // Let the files cover the requests, then compare them with 99 Hz.
    thread::sleep(Duration::from_secs(4));
    let spun_in_files = before_files.since();
    drop(setup.fixture);
    profiler.stop();
    let files = profiles(&setup.out);
    let durations: Vec<f64> = files
        .iter()
        .map(|(_, p)| p.0.duration_nanos as f64 / 1e9)
        .collect();
    for d in &durations[..durations.len() - 1] {
        assert!((2.8..3.6).contains(d), "windows of 3 s, not {durations:?}");
    }
    // Every file, the last one too: the spinner's CPU time was read from
    // just after the daemon started until just before the fixture ended.
    let in_files = sum(&files, "samples", |p, s| p.is_thread(s, spinner));
    assert_hz(in_files, &spun_in_files, "the files");
}

/// `/metrics` agrees with the files: the on-CPU samples counted equal the
/// sum of the files' `on_cpu_samples` comments, one step observation per
/// file, one target. Bad queries get 400 and unknown paths 404, with a
/// message.
#[test]
#[expect(clippy::float_cmp, reason = "counts are exact integers")]
#[expect(clippy::cast_precision_loss, reason = "small counts")]
fn metrics_match_the_files_and_bad_requests_are_refused() {
    let setup = setup(30.0);
    let (mut profiler, port) = setup.listen("1s", &["--no-off-cpu"]);
    let base = format!("http://127.0.0.1:{port}");
    for (path, status, says) in [
        ("/debug/pprof/profile?seconds=abc", 400, "seconds"),
        ("/debug/pprof/profile?seconds=0", 400, "out of range"),
        ("/debug/pprof/wall?seconds=100000", 400, "out of range"),
        ("/debug/pprof/wall?secs=2", 400, "unknown query parameter"),
        ("/debug/pprof/offcpu?seconds=1", 404, "--no-off-cpu"),
        ("/debug/pprof/heap", 404, "no such endpoint"),
    ] {
        let (got, body) = get(&format!("{base}{path}"));
        let body = String::from_utf8_lossy(&body);
        assert_eq!(got, status, "{path}: {body}");
        assert!(body.contains(says), "{path}: {body}");
    }

    profiler.wait_for_files(&setup.out, 3);
    // A window may finish between the scrape and the listing: scrape,
    // list, scrape again until both scrapes agree.
    let (text, files) = loop {
        let (status, first) = get(&format!("{base}/metrics"));
        assert_eq!(status, 200);
        let files = profiles(&setup.out);
        let (_, again) = get(&format!("{base}/metrics"));
        let written = |t: &[u8]| {
            metric(
                &String::from_utf8_lossy(t),
                "profiler_windows_written",
                None,
            )
        };
        if written(&first) == written(&again) && written(&first) == files.len() as f64 {
            break (String::from_utf8(first).unwrap(), files);
        }
    };
    let on_cpu: u64 = files
        .iter()
        .map(|(_, p)| p.comment_value("on_cpu_samples"))
        .sum();
    assert!(on_cpu > 0);
    let events = "profiler_window_events";
    assert_eq!(
        metric(&text, events, Some(("counter", "on_cpu_samples"))),
        on_cpu as f64
    );
    let steps = "profiler_window_step_seconds";
    assert_eq!(
        metric(&text, steps, Some(("step", "symbolize"))),
        files.len() as f64
    );
    assert_eq!(metric(&text, "profiler_targets", None), 1.0);
    let fill = metric(&text, "profiler_map_fill_ratio", Some(("map", "samples")));
    assert!(fill > 0.0 && fill < 0.5, "samples map fill {fill}");
    drop(setup.fixture);
    profiler.stop();
}

/// A taken port fails at start, naming the address, with nothing written.
#[test]
fn a_taken_port_fails_before_anything_is_written() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = dir.path().join("profiles");
    let run = support::run(&[
        "--all",
        "--duration",
        "2s",
        "--listen",
        &addr,
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("listening on {addr}")), "{stderr}");
    assert!(!out.exists() || fs::read_dir(&out).unwrap().count() == 0);
}

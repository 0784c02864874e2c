//! Real-kernel tests of on-CPU profiling: the real `profiler` binary
//! profiles a fixture whose single thread measures its own CPU split.
mod support;

use std::{path::Path, process::Command, thread::sleep, time::Duration};

use support::{Fixture, Profile, go_pprof_raw, profiles, require_root, run_ok};

/// Samples of `pid` whose stack (inlined frames included) contains a
/// function whose name ends with `name`, summed over `profiles`.
fn samples_in(profiles: &[(std::path::PathBuf, Profile)], pid: u32, name: &str) -> i64 {
    profiles
        .iter()
        .map(|(_, p)| {
            let index = p.value_index("samples");
            p.samples_of(pid)
                .filter(|s| p.functions(s).iter().any(|f| f.ends_with(name)))
                .map(|s| s.value[index])
                .sum::<i64>()
        })
        .sum()
}

#[test]
fn on_cpu_split_matches_the_fixtures_own_measurement() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("profiles");
    let mut fixture = Fixture::spawn("spin_split", 7.0);
    let (pid, tid) = (fixture.pid(), fixture.tid("tid"));
    fixture.go();
    run_ok(&[
        "--pid",
        &pid.to_string(),
        "--output-dir",
        out_dir.to_str().unwrap(),
        "--interval",
        "2s",
        "--duration",
        "5s",
    ]);
    let truth = fixture.results();
    let profiles = profiles(&out_dir);

    // 2 s, 2 s, then the 1 s left when --duration ends.
    assert_eq!(
        profiles.len(),
        3,
        "one file per interval plus the final window"
    );
    for (path, p) in &profiles {
        assert_eq!(p.0.string_table[0], "", "{}", path.display());
        assert_eq!(
            p.sample_types(),
            [
                ("samples", "count"),
                ("cpu", "nanoseconds"),
                ("off_cpu_events", "count"),
                ("off_cpu", "nanoseconds"),
                ("wall", "nanoseconds"),
                ("goroutine", "nanoseconds"),
            ]
        );
        assert!(p.0.duration_nanos > 0 && p.0.time_nanos > 0);
        for sample in &p.0.sample {
            assert_eq!(
                p.num_label(sample, "pid"),
                Some(i64::from(pid)),
                "only the target"
            );
            assert_eq!(p.num_label(sample, "tid"), Some(i64::from(tid)));
            assert_eq!(p.str_label(sample, "comm"), Some("spin_split"));
            assert_eq!(p.str_label(sample, "thread"), Some("spin_split"));
            if p.value(sample, "samples") > 0 {
                assert_eq!(p.str_label(sample, "state"), Some("running"));
            }
        }
    }

    let heavy = samples_in(&profiles, pid, "spin_heavy");
    let light = samples_in(&profiles, pid, "spin_light");
    let total: i64 = profiles
        .iter()
        .map(|(_, p)| p.samples_of(pid).map(|s| s.value[0]).sum::<i64>())
        .sum();
    // A busy thread for 5 s at 99 Hz is ~495 samples. Fewer than 60% means
    // samples are being lost, not merely jittered.
    assert!(
        total >= 297,
        "only {total} samples of a busy thread in 5 s at 99 Hz"
    );
    // Nearly every sample is inside one of the two functions: a wrong
    // unwinder or symbolizer puts them elsewhere.
    assert!(
        heavy + light >= total * 9 / 10,
        "heavy {heavy} + light {light} of {total}"
    );

    // With ~500 samples the share's standard error is ~2 points, so ±10
    // points only fails when attribution is really wrong (e.g. 50/50).
    #[expect(clippy::cast_precision_loss, reason = "small counts")]
    let measured = heavy as f64 / (heavy + light) as f64 * 100.0;
    #[expect(clippy::cast_precision_loss, reason = "nanosecond totals")]
    let truth = truth["heavy_ns"] as f64 / (truth["heavy_ns"] + truth["light_ns"]) as f64 * 100.0;
    assert!(
        (measured - truth).abs() <= 10.0,
        "spin_heavy share {measured:.1}% vs the fixture's own {truth:.1}%"
    );

    // A real pprof reader accepts every file and sees the functions.
    for (path, _) in &profiles[..2] {
        let raw = go_pprof_raw(path);
        assert!(
            raw.contains("spin_heavy") && raw.contains("spin_light"),
            "{raw}"
        );
    }
}

#[test]
fn all_mode_sees_the_fixture_and_never_the_idle_task() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    // Two unrelated busy processes: --all must see both without being told.
    let mut fixtures = [
        Fixture::spawn("spin_split", 5.0),
        Fixture::spawn("spin_split", 5.0),
    ];
    for fixture in &mut fixtures {
        fixture.go();
    }
    run_ok(&[
        "--all",
        "--output-dir",
        dir.path().to_str().unwrap(),
        "--interval",
        "10s",
        "--duration",
        "3s",
    ]);
    let profiles = profiles(dir.path());
    assert_eq!(profiles.len(), 1);
    let (path, p) = &profiles[0];
    for fixture in &fixtures {
        assert!(
            samples_in(&profiles, fixture.pid(), "spin_heavy") > 0,
            "fixture {} not seen in --all mode",
            fixture.pid()
        );
    }
    assert!(
        p.0.sample.iter().all(|s| p.num_label(s, "tid") != Some(0)),
        "the idle task is excluded"
    );
    // Kernel frames are symbolized through kallsyms.
    let mapping_files: Vec<_> = p.0.mapping.iter().map(|m| p.string(m.filename)).collect();
    assert!(
        mapping_files.contains(&"[kernel.kallsyms]"),
        "{mapping_files:?}"
    );
    go_pprof_raw(path);
}

#[test]
fn sigterm_and_sigint_write_the_last_window_and_exit_zero() {
    require_root();
    for signal in ["TERM", "INT"] {
        let dir = tempfile::tempdir().unwrap();
        let mut fixture = Fixture::spawn("spin_split", 10.0);
        fixture.go();
        let running = support::Profiler::start(&[
            "--pid",
            &fixture.pid().to_string(),
            "--output-dir",
            dir.path().to_str().unwrap(),
        ]);
        sleep(Duration::from_secs(1));
        running.stop_with(signal);
        let profiles = profiles(dir.path());
        assert_eq!(profiles.len(), 1, "SIG{signal}: one window written");
        assert!(profiles[0].1.samples_of(fixture.pid()).count() > 0);
    }
}

#[test]
fn sighup_writes_the_window_and_keeps_profiling() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let mut fixture = Fixture::spawn("spin_split", 10.0);
    fixture.go();
    let pid = fixture.pid().to_string();
    let mut running = support::Profiler::start(&[
        "--pid",
        &pid,
        "--output-dir",
        dir.path().to_str().unwrap(),
        "--interval",
        "60s",
    ]);
    sleep(Duration::from_secs(1));
    let status = Command::new("kill")
        .args(["-HUP", &running.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    running.wait_for_files(dir.path(), 1);
    assert_eq!(profiles(dir.path()).len(), 1, "SIGHUP wrote the window");
    assert!(running.is_alive(), "and the profiler keeps going");
    sleep(Duration::from_secs(1));
    running.stop();
    let profiles = profiles(dir.path());
    assert_eq!(profiles.len(), 2, "a new window began at the SIGHUP");
    assert!(profiles[1].1.samples_of(fixture.pid()).count() > 0);
}

#[test]
fn exits_when_every_target_has_exited() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let mut target = Command::new("sleep").arg("2").spawn().unwrap();
    let out = run_ok(&[
        "--pid",
        &target.id().to_string(),
        "--output-dir",
        dir.path().to_str().unwrap(),
        "--interval",
        "60s",
        // A safety net: the test fails on the window count if this ends it.
        "--duration",
        "30s",
    ]);
    target.wait().unwrap();
    let profiles = profiles(dir.path());
    assert_eq!(profiles.len(), 1);
    assert!(
        profiles[0].1.0.duration_nanos < 10_000_000_000,
        "ended with its target, not at --duration"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("every target has exited"));
}

#[test]
fn wait_follows_a_restarted_process_by_name_and_by_pid_file() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("profiles");
    let pid_file = dir.path().join("service.pid");
    // `spin_split` stands in for a service: restarted once, same name, and
    // its pid written to a PID file each time.
    let mut first = Fixture::spawn("spin_split", 10.0);
    first.go();
    std::fs::write(&pid_file, first.pid().to_string()).unwrap();
    let running = support::Profiler::start(&[
        "--comm",
        "spin_split",
        "--pid-file",
        pid_file.to_str().unwrap(),
        "--wait",
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "60s",
    ]);
    sleep(Duration::from_secs(1));
    let first_pid = first.pid();
    drop(first);
    // No target alive for a while: --wait keeps the daemon up.
    sleep(Duration::from_secs(1));
    let mut second = Fixture::spawn("spin_split", 10.0);
    second.go();
    std::fs::write(&pid_file, second.pid().to_string()).unwrap();
    sleep(Duration::from_secs(2));
    let log = running.stop();
    let profiles = profiles(&out);
    assert_eq!(profiles.len(), 1);
    let p = &profiles[0].1;
    for pid in [first_pid, second.pid()] {
        assert!(p.samples_of(pid).count() > 0, "no samples of {pid}:\n{log}");
    }
    assert!(log.contains("profiling a new target"), "{log}");
}

#[test]
fn without_wait_a_name_that_matches_nothing_is_refused() {
    require_root();
    let out = support::run(&[
        "--comm",
        "no-such-process-name",
        "--output-dir",
        "/tmp/profiler-never",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no running process matches --comm"));
    assert!(!Path::new("/tmp/profiler-never").exists());
}

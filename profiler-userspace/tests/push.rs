//! Pushing to backends, end to end: the real daemon profiles a fixture and
//! pushes to a fake backend (profiler-fixtures' `backend`) that decodes
//! with the servers' own message types and refuses what the real servers
//! would. What arrives must equal the file of the same run, function by
//! function; faults (a backend down, failing, hanging, refusing, a full
//! spool, a killed daemon) must lose nothing but what is counted.
mod support;

use std::{path::Path, time::Duration};

use profiler_fixtures::backend::{Backend, Behaviour, Protocol, Received};
use support::{Fixture, Profiler, go_pprof_raw, profiles, require_root, sum};

/// The fixture's two functions: on the CPU, and asleep.
const SPIN: &str = "spin_sleep::spin_span";
const SLEEP: &str = "spin_sleep::sleep_span";

fn protocol_flag(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::Pyroscope => "pyroscope",
        Protocol::Parca => "parca",
        Protocol::Otlp => "otlp",
    }
}

/// Starts the daemon on `pid`, writing files to `out` and pushing every
/// second to `url`, with `extra` flags.
fn start(
    pid: u32,
    out: &Path,
    spool: &Path,
    url: &str,
    protocol: Protocol,
    extra: &[&str],
) -> Profiler {
    let pid = pid.to_string();
    let mut args = vec![
        "--pid",
        &pid,
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "60s",
        "--push",
        url,
        "--push-protocol",
        protocol_flag(protocol),
        "--push-interval",
        "1s",
        "--push-spool-dir",
        spool.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    Profiler::start(&args)
}

/// Total of sample type `ty` under `function` over `received` profiles of
/// process `pid` (by its sample label or attribute).
fn pushed(received: &[Received], ty: &str, function: &str) -> i64 {
    received.iter().map(|p| p.total(ty, function)).sum()
}

/// The file's total of `ty` under `function`.
fn filed(out: &Path, ty: &str, function: &str) -> i64 {
    let files = profiles(out);
    for (path, _) in &files {
        go_pprof_raw(path);
    }
    sum(&files, ty, |p, s| p.functions(s).contains(&function))
}

/// Every pushed period (by series and start) arrived once, and in order.
fn assert_once_and_in_order(received: &[Received]) {
    let mut seen = std::collections::BTreeMap::<(String, String, String), Vec<i64>>::new();
    for p in received {
        let key = (
            p.labels["service_name"].clone(),
            p.labels.get("__name__").cloned().unwrap_or_default(),
            p.types().join(","),
        );
        seen.entry(key).or_default().push(p.time_nanos);
    }
    for (key, times) in seen {
        assert!(
            times.windows(2).all(|w| w[0] < w[1]),
            "{key:?}: periods out of order or twice: {times:?}"
        );
    }
}

#[test]
fn each_protocol_delivers_what_the_file_holds() {
    require_root();
    for protocol in [Protocol::Pyroscope, Protocol::Parca, Protocol::Otlp] {
        let backend = Backend::start(protocol);
        let dir = tempfile::tempdir().unwrap();
        let (out, spool) = (dir.path().join("out"), dir.path().join("spool"));
        let mut fixture = Fixture::spawn("spin_sleep", 3.0);
        let daemon = start(fixture.pid(), &out, &spool, &backend.url(), protocol, &[]);
        fixture.go();
        let truth = fixture.results();
        let log = daemon.stop_with("TERM");

        let refused: Vec<_> = backend
            .requests()
            .into_iter()
            .filter_map(|r| r.decoded.err())
            .collect();
        assert!(
            refused.is_empty(),
            "{protocol:?}: the server would refuse: {refused:?}\n{log}"
        );
        let received = backend.accepted();
        assert!(
            received.len() >= 3,
            "{protocol:?}: {} profiles\n{log}",
            received.len()
        );
        assert_once_and_in_order(&received);
        for (ty, function) in [
            ("cpu", SPIN),
            ("off_cpu", SLEEP),
            ("wall", SPIN),
            ("wall", SLEEP),
        ] {
            let file = filed(&out, ty, function);
            assert!(
                file > 0,
                "{protocol:?}: no {ty} under {function} in the file"
            );
            assert_eq!(
                pushed(&received, ty, function),
                file,
                "{protocol:?}: {ty} under {function}, pushed vs filed (fixture: {truth:?})"
            );
        }
        let services: std::collections::BTreeSet<_> = received
            .iter()
            .map(|p| p.labels["service_name"].as_str())
            .collect();
        assert_eq!(services.len(), 1, "{protocol:?}: {services:?}");
        assert!(received.iter().all(|p| !p.labels["hostname"].is_empty()));
        if protocol != Protocol::Otlp {
            let names: std::collections::BTreeSet<_> = received
                .iter()
                .map(|p| p.labels["__name__"].as_str())
                .collect();
            let expected: &[&str] = if protocol == Protocol::Pyroscope {
                &["offcpu", "process_cpu", "wall"]
            } else {
                &["parca_agent"]
            };
            assert_eq!(
                names.into_iter().collect::<Vec<_>>(),
                expected,
                "{protocol:?}"
            );
        }
        let thread_labels = received
            .iter()
            .flat_map(|p| &p.samples)
            .all(|s| s.labels.keys().any(|k| k == "tid" || k == "thread.id"));
        assert!(thread_labels, "{protocol:?}: samples without a thread id");
        assert!(
            spool_files(&spool) == 0,
            "{protocol:?}: pushes left in the spool after a clean stop"
        );
        drop(fixture);
    }
}

/// Files waiting in the spool, over every endpoint.
fn spool_files(spool: &Path) -> usize {
    walk(spool)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "push"))
        .count()
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn a_backend_down_failing_or_hanging_loses_nothing() {
    require_root();
    let port = support::free_port();
    let dir = tempfile::tempdir().unwrap();
    let (out, spool) = (dir.path().join("out"), dir.path().join("spool"));
    let url = format!("http://127.0.0.1:{port}");
    let mut fixture = Fixture::spawn("spin_sleep", 60.0);
    let metrics_port = port_besides(port).to_string();
    let daemon = start(
        fixture.pid(),
        &out,
        &spool,
        &url,
        Protocol::Pyroscope,
        &["--push-timeout", "1s", "--listen", &metrics_port],
    );
    fixture.go();
    // Down at first; then failing with 503; then hanging; then well. Each
    // phase lasts until the daemon has met it (its backoff decides when).
    let metrics_url = format!("http://127.0.0.1:{metrics_port}/metrics");
    let patience = Duration::from_secs(40);
    let started = std::time::Instant::now();
    while failures(&metrics_url, "connect") < 1.0 {
        assert!(started.elapsed() < patience, "no connect failure counted");
        std::thread::sleep(Duration::from_millis(200));
    }
    let backend = Backend::start_on(Protocol::Pyroscope, port);
    backend.set(Behaviour::Fail(503));
    assert!(
        backend.wait_until(patience, |r| r.len() >= 2),
        "no retry after a 503"
    );
    backend.set(Behaviour::Hang);
    assert!(
        backend.wait_until(patience, |r| r.iter().any(|r| r.status == 0)),
        "no retry after the 503s"
    );
    std::thread::sleep(Duration::from_millis(1500));
    backend.set(Behaviour::Accept);
    assert!(
        backend.wait_until(patience, |r| r.iter().filter(|r| r.status == 200).count()
            >= 3),
        "the spooled pushes were not sent"
    );
    // Everything spooled is sent once the backend answers.
    for cause in ["connect", "server_error", "timeout"] {
        assert!(
            failures(&metrics_url, cause) >= 1.0,
            "no {cause} failure counted"
        );
    }
    let log = daemon.stop_with("TERM");
    drop(fixture);

    let received = backend.accepted();
    assert_once_and_in_order(&received);
    for (ty, function) in [("cpu", SPIN), ("off_cpu", SLEEP)] {
        assert_eq!(
            pushed(&received, ty, function),
            filed(&out, ty, function),
            "{ty} under {function}: pushed vs filed\n{log}"
        );
    }
    assert_eq!(spool_files(&spool), 0, "pushes left in the spool:\n{log}");
    assert!(log.contains("retrying with backoff"), "{log}");
}

#[test]
fn a_refused_push_is_dropped_once_and_a_full_spool_drops_the_oldest() {
    require_root();
    let backend = Backend::start(Protocol::Parca);
    backend.set(Behaviour::Refuse);
    let dir = tempfile::tempdir().unwrap();
    let (out, spool) = (dir.path().join("out"), dir.path().join("spool"));
    let mut fixture = Fixture::spawn("spin_sleep", 3.0);
    let daemon = start(
        fixture.pid(),
        &out,
        &spool,
        &backend.url(),
        Protocol::Parca,
        &[],
    );
    fixture.go();
    fixture.results();
    let log = daemon.stop_with("TERM");
    let requests = backend.requests();
    assert!(requests.len() >= 3, "{} requests\n{log}", requests.len());
    assert!(requests.iter().all(|r| r.status == 400));
    // Each push was tried once: no period arrives twice.
    let received: Vec<_> = requests
        .into_iter()
        .flat_map(|r| r.decoded.expect("a valid request"))
        .collect();
    assert_once_and_in_order(&received);
    assert_eq!(
        log.matches("the backend refused a push").count(),
        received_periods(&received)
    );
    assert_eq!(spool_files(&spool), 0);

    // A backend that never answers, and a spool that holds a few pushes.
    let port = support::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut fixture = Fixture::spawn("spin_sleep", 6.0);
    let metrics_port = port_besides(port).to_string();
    let daemon = start(
        fixture.pid(),
        &out,
        &spool,
        &url,
        Protocol::Parca,
        &["--push-spool-max", "64K", "--listen", &metrics_port],
    );
    fixture.go();
    fixture.results();
    // The pushes go on while the fixture lingers, until the spool is full.
    let metrics_url = format!("http://127.0.0.1:{metrics_port}/metrics");
    let started = std::time::Instant::now();
    while failures(&metrics_url, "spool_full") < 1.0 {
        assert!(
            started.elapsed() < Duration::from_mins(1),
            "no dropped push counted (spool_full)"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let log = daemon.stop_with("TERM");
    assert!(
        log.contains("push spool full: dropped the oldest pushes"),
        "{log}"
    );
    let left = walk(&spool);
    let bytes: u64 = left.iter().map(|p| p.metadata().unwrap().len()).sum();
    assert!(
        !left.is_empty() && bytes <= 64 << 10,
        "{} files, {bytes} bytes",
        left.len()
    );
}

/// A free loopback port other than `taken` (which is free too, for a
/// backend that starts later).
fn port_besides(taken: u16) -> u16 {
    std::iter::repeat_with(support::free_port)
        .find(|&p| p != taken)
        .unwrap()
}

/// The daemon's count of push failures for `cause`, from its `/metrics`.
fn failures(metrics_url: &str, cause: &str) -> f64 {
    let (_, text) = support::get(metrics_url);
    let text = String::from_utf8(text).unwrap();
    text.lines()
        .filter(|l| {
            l.starts_with("profiler_push_failures_total")
                && l.contains(&format!("cause=\"{cause}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Distinct periods among `received` (one refused request each).
fn received_periods(received: &[Received]) -> usize {
    received
        .iter()
        .map(|p| p.time_nanos)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}

#[test]
fn pushes_spooled_by_a_killed_daemon_are_sent_after_a_restart() {
    require_root();
    let port = support::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let (out, spool) = (dir.path().join("out"), dir.path().join("spool"));
    let mut fixture = Fixture::spawn("spin_sleep", 3.0);
    let daemon = start(fixture.pid(), &out, &spool, &url, Protocol::Otlp, &[]);
    fixture.go();
    fixture.results();
    let log = daemon.kill();
    let spooled = spool_files(&spool);
    assert!(spooled >= 2, "{spooled} pushes spooled\n{log}");

    let backend = Backend::start_on(Protocol::Otlp, port);
    let restarted = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let mut fixture = Fixture::spawn("spin_sleep", 1.0);
    let out2 = dir.path().join("out2");
    let daemon = start(fixture.pid(), &out2, &spool, &url, Protocol::Otlp, &[]);
    assert!(
        backend.wait_until(Duration::from_secs(20), |r| r.len() >= spooled),
        "the spooled pushes were not sent"
    );
    fixture.go();
    fixture.results();
    let log = daemon.stop_with("TERM");
    let requests = backend.requests();
    assert!(requests.iter().all(|r| r.status == 200), "{log}");
    // The first run's pushes come first, in order, then the second run's.
    let received = backend.accepted();
    assert_once_and_in_order(&received);
    let first_run: Vec<_> = received
        .iter()
        .filter(|p| u128::try_from(p.time_nanos).unwrap() < restarted)
        .cloned()
        .collect();
    assert!(
        pushed(&first_run, "cpu", SPIN) > 0,
        "no push of the first run arrived\n{log}"
    );
    assert_eq!(spool_files(&spool), 0, "{log}");
}

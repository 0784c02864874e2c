//! Opt-in: push to a real backend. Set `PROFILER_TEST_PYROSCOPE_URL`,
//! `PROFILER_TEST_PARCA_URL` or `PROFILER_TEST_OTLP_URL` (e.g.
//! `http://127.0.0.1:4040`) and run this file; with none set it checks
//! nothing and says so. Every push must be accepted (2xx) and none left in
//! the spool; look the series up in the server's UI to see them.
mod support;

use std::time::Duration;

use support::{Fixture, Profiler, metric, require_root};

const BACKENDS: [(&str, &str); 3] = [
    ("PROFILER_TEST_PYROSCOPE_URL", "pyroscope"),
    ("PROFILER_TEST_PARCA_URL", "parca"),
    ("PROFILER_TEST_OTLP_URL", "otlp"),
];

#[test]
fn a_real_backend_accepts_every_push() {
    let chosen: Vec<_> = BACKENDS
        .iter()
        .filter_map(|&(var, protocol)| std::env::var(var).ok().map(|url| (var, url, protocol)))
        .collect();
    if chosen.is_empty() {
        eprintln!("no PROFILER_TEST_*_URL set: no real backend to push to");
        return;
    }
    require_root();
    for (var, url, protocol) in chosen {
        let dir = tempfile::tempdir().unwrap();
        let (out, spool) = (dir.path().join("out"), dir.path().join("spool"));
        let port = support::free_port().to_string();
        let mut fixture = Fixture::spawn("spin_sleep", 4.0);
        let pid = fixture.pid().to_string();
        let daemon = Profiler::start(&[
            "--pid",
            &pid,
            "--output-dir",
            out.to_str().unwrap(),
            "--push",
            &url,
            "--push-protocol",
            protocol,
            "--push-interval",
            "1s",
            "--push-spool-dir",
            spool.to_str().unwrap(),
            "--listen",
            &port,
        ]);
        fixture.go();
        fixture.results();
        std::thread::sleep(Duration::from_secs(2));
        let (_, text) = support::get(&format!("http://127.0.0.1:{port}/metrics"));
        let text = String::from_utf8(text).unwrap();
        let log = daemon.stop_with("TERM");
        let endpoint = url.trim_end_matches('/');
        let sent = metric(
            &text,
            "profiler_push_requests",
            Some(("endpoint", endpoint)),
        );
        assert!(
            sent >= 3.0,
            "{var}={url}: {sent} pushes accepted\n{text}\n{log}"
        );
        assert!(
            !text.contains("profiler_push_failures_total"),
            "{var}={url}: failed pushes\n{text}\n{log}"
        );
        assert!(!log.contains("refused a push"), "{log}");
    }
}

//! Pushing a whole host (`--all`): whatever the host runs, the backend
//! must take every push. One row a real server refuses (Pyroscope: an
//! empty `service_name`) loses the whole request, every program's rows.
mod support;

use std::{
    collections::BTreeSet,
    process::{Command, Stdio},
    time::Duration,
};

use profiler_fixtures::backend::{Backend, Protocol};
use support::{Profiler, require_root};

/// A shell loop as cron jobs and watch scripts run, started before the
/// daemon: each turn forks a subshell that forks `sleep` and then runs a
/// builtin, so the subshell itself never execs. It lives about 20 ms,
/// waits off the CPU, and is gone before the daemon reads `/proc` for it;
/// its name can only come from its parent's, which no exec record told.
const SHELL_LOOP: &str = "end=$(($(date +%s) + 7)); \
    while [ \"$(date +%s)\" -lt \"$end\" ]; do (sleep 0.02; :); done";

#[test]
fn a_host_of_short_lived_forks_is_pushed_whole() {
    require_root();
    let backend = Backend::start(Protocol::Pyroscope);
    let dir = tempfile::tempdir().unwrap();
    let (out, spool) = (dir.path().join("out"), dir.path().join("spool"));
    let mut shell = Command::new("sh")
        .args(["-c", SHELL_LOOP])
        .stdin(Stdio::null())
        .spawn()
        .expect("sh");
    let daemon = Profiler::start(&[
        "--all",
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "60s",
        "--push",
        &backend.url(),
        "--push-interval",
        "1s",
        "--push-spool-dir",
        spool.to_str().unwrap(),
    ]);
    let shell_pid = shell.id().to_string();
    assert!(shell.wait().expect("sh").success());
    std::thread::sleep(Duration::from_secs(1));
    let log = daemon.stop_with("TERM");

    let requests = backend.requests();
    let refused: Vec<_> = requests
        .iter()
        .filter_map(|r| r.decoded.as_ref().err())
        .collect();
    assert!(
        refused.is_empty(),
        "{} of {} pushes refused: {refused:?}\n{log}",
        refused.len(),
        requests.len()
    );
    assert!(requests.len() >= 4, "{} pushes\n{log}", requests.len());
    let received = backend.accepted();
    let subshells: BTreeSet<_> = received
        .iter()
        .flat_map(|p| &p.samples)
        .filter(|s| s.labels.get("comm").is_some_and(|c| c == "sh"))
        .filter_map(|s| s.labels.get("pid"))
        .filter(|pid| **pid != shell_pid)
        .collect();
    assert!(
        subshells.len() >= 10,
        "rows of {} subshells named sh (of about 250 run)\n{log}",
        subshells.len()
    );
}

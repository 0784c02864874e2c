//! Real-kernel test of the `cgroup`, `service` and `container_id` labels:
//! two fixtures are moved into cgroups named as systemd names a service
//! and as Docker names a container (in the machine's cgroup v2 hierarchy),
//! and `go tool pprof -tagfocus` must keep each one's samples and only
//! those.
mod support;

use std::{fs, path::PathBuf, process::Command};

use support::{Fixture, Profiler, go_pprof_raw, profiles, require_root};

const ID: &str = "5e0c2b9a8f7d6e5c4b3a29180f7e6d5c4b3a29180f7e6d5c4b3a29180f7e6d5c";

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on a hybrid machine).
fn cgroup2_root() -> PathBuf {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(2) == Some(&"cgroup2"))
        .map(|f| PathBuf::from(f[1]))
        .expect("no cgroup2 hierarchy mounted")
}

/// A cgroup made for the test, removed when dropped (after its process).
struct Cgroup(PathBuf);

impl Cgroup {
    fn new(path: PathBuf, pid: u32) -> Self {
        fs::create_dir_all(&path).unwrap();
        fs::write(path.join("cgroup.procs"), pid.to_string()).unwrap();
        Self(path)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.0);
        if let Some(parent) = self.0.parent() {
            let _ = fs::remove_dir(parent);
        }
    }
}

/// The pids of the samples `go tool pprof -tagfocus=FOCUS` keeps.
fn pids_focused(path: &std::path::Path, focus: &str) -> Vec<String> {
    let out = Command::new("go")
        .args(["tool", "pprof", "-traces", &format!("-tagfocus={focus}")])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut pids: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pid:"))
        .map(|pid| pid.trim().to_owned())
        .collect();
    pids.sort();
    pids.dedup();
    pids
}

#[test]
fn service_and_container_labels_narrow_a_profile() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let slice = cgroup2_root().join(format!("profiler-test-{}.slice", std::process::id()));
    let mut service = Fixture::spawn("cpu_bound", 2.0);
    let mut container = Fixture::spawn("cpu_bound", 2.0);
    let _service_cgroup = Cgroup::new(slice.join("fixture.service"), service.pid());
    let _container_cgroup = Cgroup::new(slice.join(format!("docker-{ID}.scope")), container.pid());

    let out = dir.path().join("profiles");
    let (a, b) = (service.pid().to_string(), container.pid().to_string());
    let profiler = Profiler::start(&[
        "--pid",
        &a,
        "--pid",
        &b,
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "60s",
    ]);
    service.go();
    container.go();
    service.results();
    container.results();
    profiler.stop();
    drop((service, container));

    let files = profiles(&out);
    assert_eq!(files.len(), 1);
    let path = &files[0].0;
    go_pprof_raw(path);
    assert_eq!(
        pids_focused(path, "service=fixture.service"),
        vec![a.clone()]
    );
    assert_eq!(
        pids_focused(path, &format!("container_id={ID}")),
        vec![b.clone()]
    );
    let mut both = vec![a, b];
    both.sort();
    let slice_name = slice.file_name().unwrap().to_str().unwrap();
    assert_eq!(
        pids_focused(path, &format!("cgroup=/{slice_name}/.*")),
        both
    );
}

//! Each container runtime's cgroup layout, made as real cgroup
//! directories with a real process in each: the labels its samples carry.
mod support;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command},
    time::Duration,
};

use profiler_fixtures::backend::{Backend, Protocol};
use support::{Profiler, profiles, require_root};

/// The cgroup v2 hierarchy's mount point (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` in a hybrid hierarchy).
fn cgroup2_root() -> PathBuf {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(fields[1]))
        })
        .expect("a cgroup2 mount")
}

/// Cgroup directories made for a test, removed (deepest first) with it.
struct Cgroups(Vec<PathBuf>);

impl Drop for Cgroups {
    fn drop(&mut self) {
        for dir in self.0.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Processes started for a test, killed with it (a failed assertion
/// left seven busy loops running after the test).
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

const ID: &str = "3f4b0c7f9d2a1e6b8c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b";
const POD: &str = "4d8a1c2e-93f0-4b7a-a1d2-3c4e5f6a7b8c";

/// Each layout: its cgroup path, and the container id, runtime and pod
/// it names.
fn layouts() -> Vec<(String, &'static str, &'static str, &'static str)> {
    let pod_slice = POD.replace('-', "_");
    vec![
        (format!("system.slice/docker-{ID}.scope"), ID, "docker", ""),
        (format!("docker/{ID}"), ID, "docker", ""),
        (
            format!(
                "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod_slice}.slice/cri-containerd-{ID}.scope"
            ),
            ID,
            "containerd",
            POD,
        ),
        (format!("kubepods/besteffort/pod{POD}/{ID}"), ID, "cri", POD),
        (format!("system.slice/crio-{ID}.scope"), ID, "cri-o", ""),
        (
            format!("machine.slice/libpod-{ID}.scope/container"),
            ID,
            "podman",
            "",
        ),
        (
            "machine.slice/machine-web\\x2d1.scope".to_owned(),
            "web-1",
            "systemd-nspawn",
            "",
        ),
    ]
}

/// Each runtime's cgroup layout, made as real cgroup directories with a
/// busy process in each: its samples carry the container's id, runtime
/// and pod, in the profile and in the series pushed to Pyroscope.
#[test]
fn each_runtimes_cgroup_layout_labels_its_processes() {
    require_root();
    let base = cgroup2_root().join(format!("profiler-test-{}", std::process::id()));
    let layouts = layouts();
    let mut made = Cgroups(Vec::new());
    let mut busy = Children(Vec::new());
    for (path, ..) in &layouts {
        let dir = base.join(path);
        let mut at = base.clone();
        made.0.push(base.clone());
        for part in Path::new(path).components() {
            at.push(part);
            made.0.push(at.clone());
        }
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let child = Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        std::fs::write(dir.join("cgroup.procs"), child.id().to_string())
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        busy.0.push(child);
    }
    made.0.dedup();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("profiles");
    let pyroscope = Backend::start(Protocol::Pyroscope);
    let profiler = Profiler::start(&[
        "--all",
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "5m",
        "--push",
        &pyroscope.url(),
        "--push-protocol",
        "pyroscope",
        "--push-interval",
        "1s",
        "--push-spool-dir",
        dir.path().join("spool").to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_secs(3));
    let log = profiler.stop();
    let pids: Vec<u32> = busy.0.iter().map(Child::id).collect();
    drop(busy);
    let files = profiles(&out);
    assert_eq!(files.len(), 1, "{log}");
    let profile = &files[0].1;
    for ((path, id, runtime, pod), &pid) in layouts.iter().zip(&pids) {
        let sample = profile
            .samples_of(pid)
            .next()
            .unwrap_or_else(|| panic!("{path}: no sample of its process"));
        let label = |key: &str| profile.str_label(sample, key).unwrap_or("");
        assert_eq!(
            (
                label("container_id"),
                label("container_runtime"),
                label("pod_uid")
            ),
            (*id, *runtime, *pod),
            "{path}"
        );
        assert!(
            label("cgroup").ends_with(path.as_str()),
            "{path}: {}",
            label("cgroup")
        );
        // The container's series, as Pyroscope receives it (Parca's and
        // OTLP's names for the same labels: `output/push/wire/tests.rs`).
        let received = pyroscope.accepted();
        let series = received
            .iter()
            .find(|r| r.labels.get("cgroup").map(String::as_str) == Some(label("cgroup")))
            .unwrap_or_else(|| panic!("{path}: no series pushed\n{log}"));
        let get = |key: &str| series.labels.get(key).map_or("", String::as_str);
        assert_eq!(
            (
                get("container_id"),
                get("container_runtime"),
                get("pod_uid")
            ),
            (*id, *runtime, *pod),
            "{path}: {:?}",
            series.labels
        );
    }
}

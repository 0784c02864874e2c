//! Programs in containers, as a runtime runs them without a container
//! engine here: an overlayfs root mounted in the program's own mount
//! namespace (so its files exist nowhere on the host), its own pid
//! namespace, `chroot` into it.
mod support;

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use profiler_fixtures::backend::{Backend, Protocol};
use support::{Profile, Profiler, profiles, require_root};

/// Debian's stripped, static Go formatter: no GNU build id, so a file
/// read after the process is gone is known only by its identity.
const GOFMT: &str = "/usr/lib/go-1.19/bin/gofmt";
/// A large Go file for it to format: about 0.1 s each time.
const SOURCE: &str = "/usr/lib/go-1.19/src/cmd/compile/internal/ssa/rewriteAMD64.go";

/// The share (%) of `comm`'s on-CPU samples whose leaf user frame has a
/// name, and their count.
fn named_leaves(profile: &Profile, comm: &str) -> (f64, i64) {
    let (mut named, mut all) = (0, 0);
    for sample in &profile.0.sample {
        if profile.str_label(sample, "comm") != Some(comm) {
            continue;
        }
        let n = profile.value(sample, "samples");
        let leaf = profile.user_frames(sample).first().copied();
        let first_user = sample.location_id.iter().find_map(|&id| {
            let location = &profile.0.location[usize::try_from(id - 1).unwrap()];
            let file = profile
                .0
                .mapping
                .iter()
                .find(|m| m.id == location.mapping_id)
                .map_or("", |m| profile.string(m.filename));
            (file != "[kernel.kallsyms]").then_some(location)
        });
        all += n;
        if first_user.is_some_and(|l| !l.line.is_empty()) && leaf.is_some() {
            named += n;
        }
    }
    #[expect(clippy::cast_precision_loss, reason = "a percentage")]
    let share = named as f64 / all.max(1) as f64 * 100.0;
    (share, all)
}

/// A short-lived program in its own mount and pid namespaces, from a
/// binary that exists only inside its overlayfs root: its frames are
/// named from that root, held open while the program lived (the issue's
/// run of this, before: 6.4% of its samples had a named leaf).
#[test]
fn a_brief_program_in_a_container_root_is_named() {
    require_root();
    for tool in [GOFMT, SOURCE] {
        assert!(
            Path::new(tool).exists(),
            "{tool} is missing: apt install golang-go (.ci/run does)"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let [lower, upper, work, merged] =
        ["lower", "upper", "work", "merged"].map(|d| dir.path().join(d));
    for d in [&lower, &upper, &work, &merged] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::create_dir_all(lower.join("bin")).unwrap();
    std::fs::create_dir_all(lower.join("src")).unwrap();
    // Its own name, so the host has no file of that name anywhere.
    std::fs::copy(GOFMT, lower.join("bin/contained_fmt")).unwrap();
    std::fs::copy(SOURCE, lower.join("src/a.go")).unwrap();
    let out = dir.path().join("profiles");
    let profiler = Profiler::start(&[
        "--all",
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "5m",
    ]);
    let script = format!(
        "mount -t overlay overlay -o lowerdir={},upperdir={},workdir={} {} && \
         exec chroot {} /bin/contained_fmt /src/a.go /src/a.go /src/a.go",
        lower.display(),
        upper.display(),
        work.display(),
        merged.display(),
        merged.display()
    );
    let started = Instant::now();
    let mut runs = 0;
    while started.elapsed() < Duration::from_secs(6) {
        let status = Command::new("unshare")
            .args(["-m", "-p", "-f", "sh", "-c", &script])
            .stdout(Stdio::null())
            .status()
            .expect("unshare");
        assert!(status.success(), "run {runs}: {status}");
        runs += 1;
    }
    let log = profiler.stop();
    let files = profiles(&out);
    assert_eq!(files.len(), 1, "{log}");
    // `comm` is the first 15 bytes of the file name.
    let (share, samples) = named_leaves(&files[0].1, "contained_fmt");
    eprintln!("{runs} runs: {share:.1}% of {samples} on-CPU samples with a named leaf");
    assert!(samples >= 100, "{samples} samples of {runs} runs\n{log}");
    assert!(
        share >= 90.0,
        "{share:.1}% of {samples} samples named\n{log}"
    );
}

/// The cgroup v2 hierarchy's mount point (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` in a hybrid hierarchy).
fn cgroup2_root() -> std::path::PathBuf {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.get(2) == Some(&"cgroup2")).then(|| std::path::PathBuf::from(fields[1]))
        })
        .expect("a cgroup2 mount")
}

/// Cgroup directories made for a test, removed (deepest first) with it.
struct Cgroups(Vec<std::path::PathBuf>);

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

/// Each runtime's cgroup layout, made as real cgroup directories with a
/// busy process in each: its samples carry the container's id, runtime
/// and pod, in the profile and in the series pushed to Pyroscope.
#[test]
fn each_runtimes_cgroup_layout_labels_its_processes() {
    require_root();
    let base = cgroup2_root().join(format!("profiler-test-{}", std::process::id()));
    let pod_slice = POD.replace('-', "_");
    let layouts = [
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
    ];
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
        // The container's series, as Pyroscope receives it (OTLP's
        // resource attributes are the same labels renamed: `otlp.rs`).
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

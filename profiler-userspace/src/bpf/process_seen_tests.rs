//! What the kernel reads of a process as it asks for its mappings (the
//! snapshot takes it instead of four `/proc` files): its name, cgroup,
//! mount namespace and root equal what `/proc` says of the same process,
//! for a process of the host in a cgroup of its own, and for one in its own
//! mount namespace, chrooted (as a container runtime runs one). A
//! real-kernel test (root), in the crate because the kernel maps are not
//! its public API.
use std::{
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    process::{Child, Command},
    time::{Duration, Instant},
};

use profiler_common::process::{ProcessSeen, RootSeen, user_dev};

use super::{Kernel, UnwindMaps as _};
use crate::cli::{self, KernelLimits};

/// A spinning shell loop, so the kernel samples it (and asks).
const SPIN: &str = "while :; do :; done";

/// The unified hierarchy's mount.
fn unified_mount() -> PathBuf {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .find(|f| f.get(2) == Some(&"cgroup2"))
        .map(|f| PathBuf::from(f[1]))
        .expect("a cgroup2 mount")
}

/// What `/proc` says of `pid`, in the kernel's terms.
fn from_proc(pid: u32, unified: &Path) -> ProcessSeen {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    let mut seen = ProcessSeen::default();
    let name = comm.trim_end().as_bytes();
    seen.comm[..name.len()].copy_from_slice(name);
    let ns = std::fs::metadata(format!("/proc/{pid}/ns/mnt")).unwrap();
    seen.mnt_ns = u32::try_from(ns.ino()).unwrap();
    let root = std::fs::metadata(format!("/proc/{pid}/root/")).unwrap();
    seen.root_ino = root.ino();
    // Kept in the user encoding here; compared through `user_dev`.
    seen.root_dev = 0;
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let path = cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("a unified hierarchy line");
    let dir = unified.join(path.trim_start_matches('/'));
    seen.cgroup = std::fs::metadata(dir).unwrap().ino();
    seen
}

/// The device of `pid`'s root, as `stat` gives it.
fn root_dev(pid: u32) -> u64 {
    std::fs::metadata(format!("/proc/{pid}/root/"))
        .unwrap()
        .dev()
}

/// Takes the kernel's requests until every one of `pids` has asked.
fn requests_of(kernel: &mut Kernel, pids: &[u32]) -> Vec<(u32, ProcessSeen)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut found: Vec<(u32, ProcessSeen)> = Vec::new();
    while Instant::now() < deadline {
        for (pid, seen) in kernel.take_requests().unwrap() {
            if pids.contains(&pid) && !found.iter().any(|(p, _)| *p == pid) {
                found.push((pid, seen));
            }
        }
        if found.len() == pids.len() {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("asked for {found:?} of {pids:?} in 10 s");
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_kernels_view_of_an_asking_process_is_procs() {
    let unified = unified_mount();
    let dir = tempfile::tempdir().unwrap();

    // A process of the host, moved into a cgroup of its own.
    let cgroup = unified.join(format!("profiler-seen-{}", std::process::id()));
    std::fs::create_dir(&cgroup).unwrap();
    let host = Killed(
        Command::new("sh")
            .args([
                "-c",
                &format!("echo $$ > {}/cgroup.procs; {SPIN}", cgroup.display()),
            ])
            .spawn()
            .unwrap(),
    );

    // One in its own mount namespace, chrooted into a busybox image.
    let image = dir.path().join("image");
    std::fs::create_dir_all(image.join("bin")).unwrap();
    std::fs::copy("/bin/busybox", image.join("bin/busybox"))
        .expect("/bin/busybox (apt install busybox-static; .ci/run does)");
    let contained = Killed(
        Command::new("unshare")
            .args(["-m", "chroot"])
            .arg(&image)
            .args(["/bin/busybox", "sh", "-c", SPIN])
            .spawn()
            .unwrap(),
    );
    let pids = [host.0.id(), contained.0.id()];
    // Both have exec'd (the chroot's busybox named) before the kernel is
    // loaded: requests of the processes as they run.
    let settled = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(format!("/proc/{}/comm", pids[1])).unwrap() != "busybox\n"
        || !std::fs::read_to_string(format!("/proc/{}/cgroup", pids[0]))
            .unwrap()
            .contains("profiler-seen")
    {
        assert!(Instant::now() < settled, "the processes did not start");
        std::thread::sleep(Duration::from_millis(20));
    }

    let out = dir.path().join("out");
    let mut args = vec!["profiler".to_owned(), "--output-dir".to_owned()];
    args.push(out.display().to_string());
    for pid in pids {
        args.extend(["--pid".to_owned(), pid.to_string()]);
    }
    let config = cli::parse(&args, KernelLimits::read()).unwrap();
    let mut kernel = Kernel::load(&config, &config.target, RootSeen::default()).unwrap();
    let asked = requests_of(&mut kernel, &pids);

    for (pid, seen) in asked {
        let proc = from_proc(pid, &unified);
        assert_eq!(seen.comm, proc.comm, "pid {pid}: name");
        assert_eq!(seen.cgroup, proc.cgroup, "pid {pid}: cgroup");
        assert_eq!(seen.mnt_ns, proc.mnt_ns, "pid {pid}: mount namespace");
        assert_eq!(seen.root_ino, proc.root_ino, "pid {pid}: root inode");
        assert_eq!(
            user_dev(seen.root_dev),
            root_dev(pid),
            "pid {pid}: root device"
        );
    }
    // The two differ where they should: not a value read of something else.
    let ours = std::fs::metadata("/proc/self/ns/mnt").unwrap().ino();
    let contained_ns = from_proc(pids[1], &unified).mnt_ns;
    assert_ne!(u64::from(contained_ns), ours, "the chroot's own namespace");
    drop((host, contained));
    let _ = std::fs::remove_dir(&cgroup);
}

/// A v1 hierarchy's mount (one with controllers), where the host has one.
fn v1_mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .find(|f| f.get(2) == Some(&"cgroup") && f.get(3).is_some_and(|o| o.contains("cpu")))
        .map(|f| PathBuf::from(f[1]))
}

/// A cgroup made under `mount`, removed (once empty) at the end.
struct MadeCgroup(PathBuf);

impl MadeCgroup {
    fn new(mount: &Path, name: &str) -> Self {
        let dir = mount.join(format!("profiler-sets-{}-{name}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        Self(dir)
    }

    fn enter(&self, pid: u32) {
        std::fs::write(self.0.join("cgroup.procs"), pid.to_string()).unwrap();
    }
}

impl Drop for MadeCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn spinner() -> Killed {
    Killed(Command::new("sh").args(["-c", SPIN]).spawn().unwrap())
}

#[test]
fn the_kernel_tells_sets_of_cgroups_apart_and_counts_moves() {
    let unified = unified_mount();
    let (a, b, c, d) = (spinner(), spinner(), spinner(), spinner());
    // `c` in a unified cgroup of its own; `d` in a v1 one, its unified
    // cgroup the others' (a hybrid host's container under cgroupfs).
    let own = MadeCgroup::new(&unified, "own");
    own.enter(c.0.id());
    let v1 = v1_mount().map(|mount| MadeCgroup::new(&mount, "v1"));
    if let Some(v1) = &v1 {
        v1.enter(d.0.id());
    }
    let pids = [a.0.id(), b.0.id(), c.0.id(), d.0.id()];
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["profiler".to_owned(), "--output-dir".to_owned()];
    args.push(dir.path().display().to_string());
    for pid in pids {
        args.extend(["--pid".to_owned(), pid.to_string()]);
    }
    let config = cli::parse(&args, KernelLimits::read()).unwrap();
    let mut kernel = Kernel::load(&config, &config.target, RootSeen::default()).unwrap();
    let asked = requests_of(&mut kernel, &pids);
    let seen = |pid: u32| asked.iter().find(|(p, _)| *p == pid).unwrap().1;
    let [a_seen, b_seen, c_seen, d_seen] = pids.map(seen);
    assert_ne!(a_seen.css_set, 0, "a set read");
    assert_eq!(a_seen.css_set, b_seen.css_set, "forked alike: one set");
    assert_eq!(a_seen.cgroup_subsys, b_seen.cgroup_subsys);
    assert_ne!(
        a_seen.css_set, c_seen.css_set,
        "moved in the unified hierarchy"
    );
    if v1.is_some() {
        assert_ne!(a_seen.css_set, d_seen.css_set, "moved in a v1 hierarchy");
        assert_eq!(
            a_seen.cgroup, d_seen.cgroup,
            "which the unified id does not tell"
        );
        assert_ne!(
            a_seen.cgroup_subsys, d_seen.cgroup_subsys,
            "and the controllers' cgroups do"
        );
    }
    let before = kernel.cgroup_moves().unwrap();
    assert!(
        asked.iter().all(|(_, seen)| seen.cgroup_moves == before),
        "no move since loading: {asked:?}, {before}"
    );
    own.enter(b.0.id());
    let after = kernel.cgroup_moves().unwrap();
    assert!(after > before, "a move counted: {before} -> {after}");
    if let Some(v1) = &v1 {
        v1.enter(a.0.id());
        assert!(kernel.cgroup_moves().unwrap() > after, "a v1 move counted");
    }
    drop((a, b, c, d));
    std::thread::sleep(Duration::from_millis(100));
}

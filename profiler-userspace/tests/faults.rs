//! Faults while running: the daemon keeps sampling, writes what it could
//! not write later, and never leaves partial files.
mod support;

use std::{
    fs,
    io::Write as _,
    path::Path,
    process::Command,
    thread::sleep,
    time::{Duration, Instant},
};

use support::{Fixture, Profiler, profiles, require_root};

/// A small tmpfs, unmounted on drop.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "mount tmpfs");
        Self(dir)
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// Writes zeros to `path` until the filesystem is full.
fn fill(path: &Path) {
    let mut file = fs::File::create(path).unwrap();
    let chunk = vec![0u8; 16 * 1024];
    while file.write_all(&chunk).is_ok() {}
}

#[test]
fn a_full_disk_delays_windows_but_loses_none() {
    require_root();
    let disk = Tmpfs::mount("2m");
    let out = disk.path().join("profiles");
    let mut fixture = Fixture::spawn("spin_split", 10.0);
    fixture.go();
    let mut running = Profiler::start(&[
        "--pid",
        &fixture.pid().to_string(),
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "1s",
    ]);
    // The windows cover the run from the daemon's first (its start, which
    // loads the programs, is outside them) to the signal that ends it.
    let started = Instant::now();
    // Fill the disk only once a window has been written: the first
    // window's cold symbolization can take seconds on a busy machine, and
    // the disk must be full while later windows end, not while it runs.
    running.wait_for_files(&out, 1);
    let filler = disk.path().join("filler");
    fill(&filler);
    // Two or three windows end while the disk is full.
    sleep(Duration::from_millis(2500));
    let written_while_full = fs::read_dir(&out).unwrap().count();
    fs::remove_file(&filler).unwrap();
    sleep(Duration::from_secs(2));
    let elapsed = started.elapsed();
    let stderr = running.stop();

    assert!(
        stderr.contains("No space left on device"),
        "the failure is logged:\n{stderr}"
    );
    let names: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| n.starts_with("profile-")),
        "partial files left: {names:?}"
    );
    let profiles = profiles(&out);
    assert!(
        profiles.len() > written_while_full + 2,
        "delayed windows written later"
    );
    // No window lost: together they cover the run (about 50 ms more, from
    // just before the daemon says it profiles), less than one 1 s window
    // short.
    let covered: i64 = profiles.iter().map(|(_, p)| p.0.duration_nanos).sum();
    #[expect(clippy::cast_possible_truncation, reason = "seconds")]
    let run = elapsed.as_nanos() as i64;
    assert!(
        covered > run - 500_000_000,
        "windows cover {covered} ns of a {run} ns run"
    );
}

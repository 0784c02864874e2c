//! Containers as a runtime makes them, without a container engine.
use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// A container's root, as a runtime makes one: an image's files in an
/// overlayfs lower layer, mounted by each run in its own mount namespace
/// (so nothing of it is visible on the host), in its own pid namespace,
/// chrooted into.
pub struct Container {
    pub lower: PathBuf,
    pub upper: PathBuf,
    work: PathBuf,
    merged: PathBuf,
}

impl Container {
    pub fn new(dir: &Path) -> Self {
        Self::mounted_at(dir, &dir.join("merged"))
    }

    /// A container whose root each run mounts at `merged` (in its own
    /// mount namespace): the host sees its files' paths under `merged`,
    /// as those of any other container mounted there.
    pub fn mounted_at(dir: &Path, merged: &Path) -> Self {
        let [lower, upper, work] = ["lower", "upper", "work"].map(|d| dir.join(d));
        let merged = merged.to_owned();
        for d in [&lower, &upper, &work, &merged] {
            std::fs::create_dir_all(d).unwrap();
        }
        Self {
            lower,
            upper,
            work,
            merged,
        }
    }

    /// Copies `file` into the image at `at`.
    pub fn add(&self, file: &Path, at: &str) {
        let to = self.lower.join(at);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(file, &to).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }

    /// Copies the host's libc and loader into the image, as a Debian-based
    /// image carries its own.
    pub fn add_libc(&self) {
        for (from, at) in [
            (
                "/lib/x86_64-linux-gnu/libc.so.6",
                "lib/x86_64-linux-gnu/libc.so.6",
            ),
            ("/lib64/ld-linux-x86-64.so.2", "lib64/ld-linux-x86-64.so.2"),
        ] {
            self.add(Path::new(from), at);
        }
    }

    /// The shell command that mounts a fresh root and execs `argv` in it.
    fn script(&self, argv: &[String]) -> String {
        format!(
            "mount -t overlay overlay -o lowerdir={},upperdir={},workdir={} {} && exec chroot {} {}",
            self.lower.display(),
            self.upper.display(),
            self.work.display(),
            self.merged.display(),
            self.merged.display(),
            argv.join(" ")
        )
    }

    /// The command that runs `argv` in a fresh container.
    pub fn command(&self, argv: &[String]) -> Command {
        let mut command = Command::new("unshare");
        command.args(["-m", "-p", "-f", "sh", "-c", &self.script(argv)]);
        command
    }

    /// Starts `argv` in a fresh container, its stdin and stdout piped.
    pub fn spawn(&self, argv: &[String]) -> Child {
        self.command(argv)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("unshare")
    }

    /// Runs the command `argv(run)` in a fresh container, one run after
    /// another, for `duration` (once at least); returns the number of
    /// runs.
    pub fn run_for(&self, duration: Duration, argv: impl Fn(usize) -> Vec<String>) -> usize {
        let started = Instant::now();
        let mut runs = 0;
        while runs == 0 || started.elapsed() < duration {
            let status = Command::new("unshare")
                .args(["-m", "-p", "-f", "sh", "-c", &self.script(&argv(runs))])
                .stdout(Stdio::null())
                .status()
                .expect("unshare");
            assert!(status.success(), "run {runs}: {status}");
            runs += 1;
        }
        runs
    }
}

//! Section 14: containers of short processes. Fifty containers at once,
//! each its own mount and pid namespaces over its own overlayfs root
//! (busybox, as a minimal image), each running short processes one after
//! another, under `--all`: the daemon's CPU, and its open file
//! descriptors before, at the peak and after every container is gone (it
//! holds a handle per distinct root while it needs it).
use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use anyhow::{Context as _, ensure};

use super::{
    daemon_metrics::Metrics,
    tools::{SCRATCH_DIR, attach, profiler},
};
use crate::procfs::cpu_ticks;

/// Containers at once, and the processes each runs in turn.
const CONTAINERS: usize = 50;
const PROCESSES_EACH: usize = 40;

/// A container: its directories, and its shell once started.
struct Container {
    dir: PathBuf,
    child: Option<Child>,
}

impl Container {
    /// Starts container `i` over the image `lower`: a shell that runs
    /// `PROCESSES_EACH` checksums of the image's busybox, one after
    /// another.
    fn start(lower: &Path, i: usize) -> anyhow::Result<Self> {
        let dir = Path::new(SCRATCH_DIR).join(format!("container-{i}"));
        let _ = fs::remove_dir_all(&dir);
        let [upper, work, merged] = ["upper", "work", "merged"].map(|d| dir.join(d));
        for d in [&upper, &work, &merged] {
            fs::create_dir_all(d)?;
        }
        let script = format!(
            "mount -t overlay overlay -o lowerdir={},upperdir={},workdir={} {m} && \
             exec chroot {m} /bin/busybox sh -c 'i=0; while [ $i -lt {PROCESSES_EACH} ]; do \
             /bin/busybox sha256sum /bin/busybox; i=$((i+1)); done'",
            lower.display(),
            upper.display(),
            work.display(),
            m = merged.display(),
        );
        let child = Command::new("unshare")
            .args(["-m", "-p", "-f", "sh", "-c", &script])
            .stdout(Stdio::null())
            .spawn()
            .context("unshare")?;
        Ok(Self {
            dir,
            child: Some(child),
        })
    }

    fn wait(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            let status = child.wait()?;
            ensure!(status.success(), "a container's shell: {status}");
        }
        Ok(())
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn open_fds(pid: u32) -> anyhow::Result<usize> {
    Ok(fs::read_dir(format!("/proc/{pid}/fd"))?.count())
}

/// Writes section 14.
pub(super) fn containers(report: &mut String) -> anyhow::Result<()> {
    let lower = Path::new(SCRATCH_DIR).join("image");
    fs::create_dir_all(lower.join("bin"))?;
    fs::copy("/bin/busybox", lower.join("bin/busybox"))
        .context("/bin/busybox (apt install busybox-static)")?;
    let metrics = Metrics::new()?;
    let mut args = vec!["--all", "--interval", "5s"];
    args.extend(metrics.args());
    let attached = attach(&profiler("", &args), 0)?.context("profiler")?;
    let pid = attached.child.id();
    let fds_before = open_fds(pid)?;
    let ticks0 = cpu_ticks(pid)?;
    let started = Instant::now();
    let mut containers = (0..CONTAINERS)
        .map(|i| Container::start(&lower, i))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut fds_peak = fds_before;
    while containers.iter_mut().any(|c| {
        c.child
            .as_mut()
            .is_some_and(|child| child.try_wait().ok().flatten().is_none())
    }) {
        fds_peak = fds_peak.max(open_fds(pid)?);
        sleep(Duration::from_millis(50));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let ticks = cpu_ticks(pid)? - ticks0;
    for container in &mut containers {
        container.wait()?;
    }
    drop(containers);
    // Three windows' ends: the gone processes' roots are let go two
    // windows after their last samples.
    sleep(Duration::from_secs(16));
    let fds_after = open_fds(pid)?;
    let scrape = metrics.scrape()?;
    attached.stop()?;
    #[expect(clippy::cast_precision_loss, reason = "a percentage")]
    let cpu_pct = ticks as f64 / 100.0 / elapsed * 100.0;
    #[expect(clippy::cast_precision_loss, reason = "a rate")]
    let per_second = (CONTAINERS * (PROCESSES_EACH + 1)) as f64 / elapsed;
    writeln!(report, "## 14. Containers of short processes\n")?;
    writeln!(
        report,
        "{CONTAINERS} containers at once (each its own mount and pid namespaces over its \
         own overlayfs root holding busybox), each running {PROCESSES_EACH} checksums of its \
         busybox one after another ({per_second:.0} processes a second), under `profiler --all \
         --interval 5s`, over {elapsed:.1} s. The daemon holds one handle per distinct root \
         while it needs it (the process watch and the symbolizer one each): its descriptors at \
         the peak rise by about two per container, and are back where they started two windows \
         after the containers are gone.\n"
    )?;
    writeln!(
        report,
        "| daemon CPU (% of one core) | open fds before | at the peak | 16 s after | processes remembered (gone before their window ended) |"
    )?;
    writeln!(report, "| --- | --- | --- | --- | --- |")?;
    writeln!(
        report,
        "| {cpu_pct:.2} | {fds_before} | {fds_peak} | {fds_after} | {:.0} |\n",
        scrape.counter("processes_remembered")?,
    )?;
    Ok(())
}

//! Another kernel, booted under QEMU's TCG: an initramfs holds busybox,
//! the release profiler, the fixtures (with the shared libraries they
//! load) and `profiler-fixtures/vm/init.sh`, which runs them and prints
//! every file the runs wrote to the serial console, base64 between
//! markers. [`boot`] writes those files back under a directory here.
use std::{
    collections::BTreeMap,
    io::{Read as _, Write as _},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use base64::Engine as _;

/// Longest a boot may take: the suite needs about two minutes under TCG.
const TIMEOUT: Duration = Duration::from_mins(7);

/// What a boot left: the files the runs wrote, under `dir/RUN/`, and the
/// whole console (also in `dir/console.log`). The directory is kept after
/// the tests, failed or not, until the next boot: `target/tmp/vm-boot/`.
pub struct Boot {
    pub dir: PathBuf,
    pub console: String,
}

impl Boot {
    /// The directory of run `name`'s files.
    pub fn run_dir(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A file the run `name` wrote, as text.
    pub fn text(&self, name: &str, file: &str) -> String {
        std::fs::read_to_string(self.run_dir(name).join(file))
            .unwrap_or_else(|e| panic!("{name}/{file}: {e}\nconsole:\n{}", self.console))
    }
}

/// Boots `kernel` with `files` (path in the VM → path here) and
/// `init.sh` as `/init`, two vCPUs, and returns what the runs wrote.
///
/// # Errors
/// When the VM does not finish in [`TIMEOUT`] or its console holds no
/// `=== done`: the message holds the whole console.
///
/// # Panics
/// When QEMU cannot run.
pub fn boot(kernel: &Path, files: &BTreeMap<String, PathBuf>) -> Result<Boot, String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("vm-boot");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let initramfs = dir.join("initramfs.cpio");
    write_initramfs(&initramfs, files);
    let mut qemu = Command::new("qemu-system-x86_64")
        // One host thread runs both vCPUs (thread=single): with a thread
        // each, a CI run livelocked while the kernel patched a
        // tracepoint's site in `__schedule` (one vCPU looping in
        // `exc_int3`, the other waiting for it in
        // `smp_call_function_many_cond`, an RCU stall), which is TCG's
        // cross-vCPU code modification, not the guest's.
        .args([
            "-accel",
            "tcg,thread=single",
            "-cpu",
            "max",
            "-smp",
            "2",
            "-m",
            "2048",
        ])
        .arg("-kernel")
        .arg(kernel)
        .arg("-initrd")
        .arg(&initramfs)
        // Warnings and stack dumps reach the console (loglevel=5), and a
        // soft lockup panics, which ends the VM at once (-no-reboot). A
        // lockup is one of 120 s (watchdog_thresh=60): under TCG on a
        // loaded host, a vCPU stalled for 26 s in plain code (`do_exit` of
        // a `sleep`, no BPF program on its stack) panicked a CI run at
        // the default 20 s; a real hang still ends the VM well within
        // TIMEOUT.
        .args([
            "-append",
            "console=ttyS0 loglevel=5 softlockup_panic=1 watchdog_thresh=60 panic=-1 rdinit=/init",
        ])
        .args(["-nographic", "-no-reboot"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("qemu-system-x86_64 (.ci/run installs qemu-system-x86)");
    let mut stdout = qemu.stdout.take().unwrap();
    let mut stderr = qemu.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        let mut errors = String::new();
        let _ = stderr.read_to_string(&mut errors);
        String::from_utf8_lossy(&bytes).replace('\r', "") + &errors
    });
    let started = Instant::now();
    let mut timed_out = false;
    while qemu.try_wait().unwrap().is_none() {
        if started.elapsed() > TIMEOUT {
            let _ = qemu.kill();
            let _ = qemu.wait();
            timed_out = true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let console = reader.join().unwrap();
    std::fs::write(dir.join("console.log"), &console).unwrap();
    eprintln!("VM: {:.0} s", started.elapsed().as_secs_f64());
    if timed_out {
        return Err(format!("the VM did not finish in {TIMEOUT:?}:\n{console}"));
    }
    if !console.contains("=== done") {
        return Err(format!("the suite did not finish:\n{console}"));
    }
    write_files(&dir, &console);
    Ok(Boot { dir, console })
}

/// Writes the files printed between `=== file NAME` and `=== end` under
/// `dir`.
fn write_files(dir: &Path, console: &str) {
    let mut lines = console.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix("=== file ") else {
            continue;
        };
        let text: String = lines
            .by_ref()
            .take_while(|l| *l != "=== end")
            .map(str::trim)
            .collect();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

/// `files`, the shared libraries the programs among them load (by
/// `ldd`), `init.sh` as `/init` and a console device, as an uncompressed
/// `newc` cpio archive: the format the kernel unpacks.
fn write_initramfs(path: &Path, files: &BTreeMap<String, PathBuf>) {
    let mut all = files.clone();
    all.insert(
        "/init".into(),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiler-fixtures/vm/init.sh"),
    );
    for host in files.values() {
        for lib in shared_libraries(host) {
            all.insert(lib.to_string_lossy().into_owned(), lib);
        }
    }
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut dirs = std::collections::BTreeSet::new();
    for name in
        all.keys()
            .map(String::as_str)
            .chain(["/dev/console", "/proc/x", "/sys/x", "/tmp/x"])
    {
        let mut dir = Path::new(name).parent();
        while let Some(d) = dir.filter(|d| *d != Path::new("/")) {
            dirs.insert(d.to_path_buf());
            dir = d.parent();
        }
    }
    let mut ino = 1;
    for dir in &dirs {
        entry(
            &mut out,
            &mut ino,
            &dir.to_string_lossy(),
            0o040_755,
            &[],
            0,
        );
    }
    // The kernel opens /dev/console for /init before devtmpfs is mounted.
    entry(
        &mut out,
        &mut ino,
        "/dev/console",
        0o020_600,
        &[],
        5 << 8 | 1,
    );
    for (name, host) in &all {
        let bytes = std::fs::read(host).unwrap_or_else(|e| panic!("{}: {e}", host.display()));
        entry(&mut out, &mut ino, name, 0o100_755, &bytes, 0);
    }
    entry(&mut out, &mut ino, "TRAILER!!!", 0, &[], 0);
    out.flush().unwrap();
}

/// One `newc` entry; `rdev` is `major << 8 | minor` for a device.
fn entry(
    out: &mut impl std::io::Write,
    ino: &mut u32,
    name: &str,
    mode: u32,
    data: &[u8],
    rdev: u32,
) {
    let name = name.trim_start_matches('/');
    let size = u32::try_from(data.len()).unwrap();
    let name_size = u32::try_from(name.len() + 1).unwrap();
    let header = format!(
        "070701{:08x}{mode:08x}{:08x}{:08x}{:08x}{:08x}{size:08x}{:08x}{:08x}{:08x}{:08x}{name_size:08x}{:08x}",
        *ino,
        0,
        0,
        1,
        0,
        0,
        0,
        rdev >> 8,
        rdev & 0xff,
        0
    );
    *ino += 1;
    out.write_all(header.as_bytes()).unwrap();
    out.write_all(name.as_bytes()).unwrap();
    out.write_all(&[0]).unwrap();
    pad(out, header.len() + name.len() + 1);
    out.write_all(data).unwrap();
    pad(out, data.len());
}

fn pad(out: &mut impl std::io::Write, len: usize) {
    out.write_all(&[0; 3][..(4 - len % 4) % 4]).unwrap();
}

/// The shared libraries `program` loads, with the loader: what `ldd`
/// prints as paths (nothing for a static program).
fn shared_libraries(program: &Path) -> Vec<PathBuf> {
    let out = Command::new("ldd").arg(program).output().expect("ldd");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let path = line.split("=>").last()?.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

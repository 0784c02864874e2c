//! Programs in containers, as a runtime runs them without a container
//! engine here: an overlayfs root mounted in the program's own mount
//! namespace (so its files exist nowhere on the host), its own pid
//! namespace, `chroot` into it.
mod support;

use std::{
    collections::HashSet,
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use object::{Object as _, ObjectSymbol as _};
use support::{Profile, Profiler, build, go, profiles, require_root};

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
    let container = Container::new(dir.path());
    // Its own name, so the host has no file of that name anywhere.
    container.add(Path::new(GOFMT), "bin/contained_fmt");
    container.add(Path::new(SOURCE), "src/a.go");
    let out = dir.path().join("profiles");
    let profiler = start_all(&out);
    let runs = container.run_for(Duration::from_secs(6), |_| {
        vec![
            "/bin/contained_fmt".into(),
            "/src/a.go".into(),
            "/src/a.go".into(),
            "/src/a.go".into(),
        ]
    });
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

/// The daemon under `--all`, writing one window to `out` when stopped.
fn start_all(out: &Path) -> Profiler {
    Profiler::start(&[
        "--all",
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "5m",
    ])
}

/// A container's root, as a runtime makes one: an image's files in an
/// overlayfs lower layer, mounted by each run in its own mount namespace
/// (so nothing of it is visible on the host), in its own pid namespace,
/// chrooted into.
struct Container {
    lower: PathBuf,
    upper: PathBuf,
    work: PathBuf,
    merged: PathBuf,
}

impl Container {
    fn new(dir: &Path) -> Self {
        let [lower, upper, work, merged] =
            ["lower", "upper", "work", "merged"].map(|d| dir.join(d));
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
    fn add(&self, file: &Path, at: &str) {
        let to = self.lower.join(at);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(file, &to).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }

    /// Copies the host's libc and loader into the image, as a Debian-based
    /// image carries its own.
    fn add_libc(&self) {
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

    /// Starts `argv` in a fresh container, its stdin and stdout piped.
    fn spawn(&self, argv: &[String]) -> Child {
        Command::new("unshare")
            .args(["-m", "-p", "-f", "sh", "-c", &self.script(argv)])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("unshare")
    }

    /// Runs the command `argv(run)` in a fresh container, one run after
    /// another, for `duration`; returns the number of runs.
    fn run_for(&self, duration: Duration, argv: impl Fn(usize) -> Vec<String>) -> usize {
        let started = Instant::now();
        let mut runs = 0;
        while started.elapsed() < duration {
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

/// A file made on the host for a test, removed with it.
struct HostFile(PathBuf);

impl Drop for HostFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The functions a binary's symbol table defines.
fn functions_of(bin: &Path) -> HashSet<String> {
    let data = std::fs::read(bin).unwrap();
    let file = object::File::parse(&*data).unwrap();
    file.symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.is_definition())
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .collect()
}

/// A `cc -O2` program, each run living 20 to 500 ms in a container whose
/// image carries its own copy of libc, at a path where the host holds a
/// different program: its leaves are named with their callers, as on the
/// host, and never with the host program's names.
#[test]
fn a_brief_c_program_in_a_container_is_named_never_from_the_hosts_file() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let inside = build::c_program("short_lived", dir.path());
    let on_host = build::c_program("thread_exec", dir.path());
    let at = format!("opt/profiler-test-{}/bin/app", std::process::id());
    let host = HostFile(Path::new("/").join(at.split('/').take(2).collect::<PathBuf>()));
    std::fs::create_dir_all(Path::new("/").join(&at).parent().unwrap()).unwrap();
    std::fs::copy(&on_host, Path::new("/").join(&at)).unwrap();
    let container = Container::new(&dir.path().join("root"));
    container.add(&inside, &at);
    container.add_libc();

    let out = dir.path().join("profiles");
    let profiler = start_all(&out);
    let spins = ["0.02", "0.05", "0.1", "0.2", "0.5"];
    let runs = container.run_for(Duration::from_secs(8), |run| {
        vec![
            format!("/{at}"),
            spins[run % spins.len()].to_owned(),
            "0".to_owned(),
        ]
    });
    let log = profiler.stop();
    drop(host);
    let files = profiles(&out);
    assert_eq!(files.len(), 1, "{log}");
    let profile = &files[0].1;
    let (share, samples) = named_leaves(profile, "app");
    eprintln!("{runs} runs: {share:.1}% of {samples} on-CPU samples with a named leaf");
    assert!(samples >= 200, "{samples} samples of {runs} runs\n{log}");
    assert!(
        share >= 90.0,
        "{share:.1}% of {samples} samples named\n{log}"
    );

    let host_only: HashSet<String> = functions_of(&on_host)
        .difference(&functions_of(&inside))
        .cloned()
        .collect();
    assert!(!host_only.is_empty(), "the host's program: {host_only:?}");
    let (mut in_work, mut with_caller) = (0, 0);
    for sample in &profile.0.sample {
        if profile.str_label(sample, "comm") != Some("app") {
            continue;
        }
        let frames = profile.user_frames(sample);
        let wrong: Vec<_> = frames
            .iter()
            .filter(|(f, _)| host_only.contains(*f))
            .collect();
        assert!(wrong.is_empty(), "named from the host's file: {wrong:?}");
        if frames.first().is_some_and(|(f, _)| *f == "brief_work") {
            let n = profile.value(sample, "samples");
            in_work += n;
            if frames.get(1).is_some_and(|(f, _)| *f == "main") {
                with_caller += n;
            }
        }
    }
    assert!(
        in_work >= samples / 2,
        "{in_work} of {samples} samples in brief_work"
    );
    assert!(
        with_caller * 10 >= in_work * 9,
        "{with_caller} of {in_work} brief_work samples under main"
    );
}

/// A stripped Go server in a container: the goroutine view reads it
/// (its binary through the process, its goroutines from its memory) as
/// one on the host: 100 receivers waiting through its 2 s phase hold
/// three quarters of their time at least.
#[test]
fn a_go_program_in_a_container_gets_the_goroutine_view() {
    require_root();
    let toolchain = go::toolchains().pop().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bin = go::build(&toolchain, "goroutines", dir.path(), "goview_boxed", true);
    let container = Container::new(&dir.path().join("root"));
    container.add(&bin, "srv/goview_boxed");
    container.add_libc();
    std::fs::create_dir_all(container.lower.join("tmp")).unwrap();
    let out = dir.path().join("profiles");
    let profiler = start_all(&out);
    let mut server = container.spawn(&[
        "/srv/goview_boxed".into(),
        "2".into(),
        "/tmp/reference.txt".into(),
    ]);
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.starts_with("ready"), "{line:?}");
    let mut stdin = server.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("samples="), "{line:?}");
    drop(stdin);
    server.wait().unwrap();
    let log = profiler.stop();
    assert!(log.contains("goroutine view on (go1."), "{log}");
    let files = profiles(&out);
    let profile = &files[0].1;
    let receiving: i64 = profile
        .0
        .sample
        .iter()
        .filter(|s| profile.str_label(s, "comm") == Some("goview_boxed"))
        .filter(|s| profile.functions(s).contains(&"main.receiver"))
        .map(|s| profile.value(s, "goroutine"))
        .sum();
    eprintln!("{receiving} ns under main.receiver");
    assert!(
        receiving >= 150_000_000_000,
        "{receiving} ns under main.receiver\n{log}"
    );
}

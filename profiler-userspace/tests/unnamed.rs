//! Frames left unnamed are counted by cause: a binary deleted or replaced
//! after its process exited (`binary_gone`), and every profile's unnamed
//! frames add up with its named ones to all of its user frames. A binary
//! gone whose debug file can be found by build id is named from it.
mod support;

use std::{path::Path, process::Command};

use support::{Fixture, Profiler, build, profiles, require_root};

#[test]
fn a_binary_deleted_after_its_process_exited_is_counted_as_gone() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let built = Path::new(env!("CARGO_BIN_EXE_profiler")).with_file_name("cpu_bound");
    let copy = dir.path().join("cpu_bound_copy");
    std::fs::copy(&built, &copy).unwrap();
    let out = dir.path().join("out");
    let daemon = Profiler::start(&[
        "--all",
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "60s",
    ]);
    let mut fixture = Fixture::spawn_path(&copy, 1.0);
    let pid = fixture.pid();
    fixture.go();
    fixture.results();
    drop(fixture);
    std::fs::remove_file(&copy).unwrap();
    daemon.stop();

    let files = profiles(&out);
    let (mut samples, mut named) = (0, 0);
    for (_, p) in &files {
        for s in p.samples_of(pid) {
            samples += p.value(s, "samples");
            // Named frames only: an unnamed one has no line.
            named += p
                .user_frames(s)
                .iter()
                .filter(|(_, file)| file.ends_with("cpu_bound_copy"))
                .count();
        }
        let total = p.comment_value("user_frames");
        let resolved = p.comment_value("user_frames_resolved");
        let unnamed: u64 = [
            "user_frames_unnamed_no_mapping",
            "user_frames_unnamed_binary_gone",
            "user_frames_unnamed_no_symbols",
        ]
        .iter()
        .map(|c| p.comment_value(c))
        .sum();
        assert_eq!(resolved + unnamed, total, "named and unnamed frames add up");
        assert!(
            p.comment_value("user_frames_unnamed_binary_gone") > 0,
            "no frame of the deleted binary counted as gone: {:?}",
            p.comments()
        );
    }
    assert!(samples > 50, "{samples} samples of the fixture");
    // Its frames keep their mapping and address, and no name.
    assert_eq!(named, 0, "frames of a deleted binary were named");
}

/// Runs `bin SPIN` (0.5 s of wall time) to its end under `--all`, then
/// replaces `bin` on disk with `other` (a new file renamed over it, as
/// package managers do) before the window ends: the process's frames in `bin` keep their
/// addresses, unnamed and counted as gone, and never take names from the
/// new file.
fn replaced_after_exit(bin: &Path, other: &Path, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let daemon = Profiler::start(&["--all", "--output-dir", out.to_str().unwrap()]);
    let run = Command::new(bin).arg("0.5").args(extra).output().unwrap();
    assert!(run.status.success(), "{run:?}");
    let text = String::from_utf8_lossy(&run.stdout);
    let (_, fields) = text.trim().split_once(' ').unwrap();
    let fields: std::collections::HashMap<String, u64> = profiler_fixtures::client::fields(fields);
    let pid = u32::try_from(fields["pid"]).unwrap();
    let staged = bin.with_extension("new");
    std::fs::copy(other, &staged).unwrap();
    std::fs::rename(&staged, bin).unwrap();
    daemon.stop();

    let bin_name = bin.to_str().unwrap();
    let (mut samples, mut named, mut gone) = (0, 0, 0);
    let files = profiles(&out);
    for (_, p) in &files {
        for s in p.samples_of(pid) {
            samples += p.value(s, "samples");
            named += p
                .user_frames(s)
                .iter()
                .filter(|(_, file)| *file == bin_name)
                .count();
        }
        gone += p.comment_value("user_frames_unnamed_binary_gone");
    }
    // The spin is wall time; a vCPU the hypervisor holds back runs less
    // of it (a CI run read 3 samples). The CPU time the process measured
    // itself (every thread's) is what the timer samples.
    #[expect(clippy::cast_precision_loss, reason = "sample counts")]
    let expected = fields["cpu_ns"] as f64 * 99.0 / 1e9;
    #[expect(clippy::cast_precision_loss, reason = "sample counts")]
    let share = samples as f64 / expected;
    assert!(
        samples > 0 && share >= 0.8,
        "{samples} samples of the fixture for {expected:.0} expected by its CPU time; \
         the windows' on-CPU samples by process: {:?}; {:?}",
        on_cpu_by_process(&files),
        files.first().map(|(_, p)| p.comments())
    );
    assert_eq!(named, 0, "frames of a replaced binary were named");
    assert!(gone > 0, "no frame of the replaced binary counted as gone");
}

/// The windows' on-CPU samples by `(pid, comm)`, most first: where the
/// fixture's went when it has fewer than its CPU time.
fn on_cpu_by_process(
    files: &[(std::path::PathBuf, support::Profile)],
) -> Vec<((i64, String), i64)> {
    let mut by: std::collections::HashMap<(i64, String), i64> = std::collections::HashMap::new();
    for (_, p) in files {
        for s in &p.0.sample {
            let key = (
                p.num_label(s, "pid").unwrap_or(-1),
                p.str_label(s, "comm").unwrap_or("").to_owned(),
            );
            *by.entry(key).or_default() += p.value(s, "samples");
        }
    }
    let mut by: Vec<_> = by.into_iter().filter(|(_, n)| *n > 0).collect();
    by.sort_by_key(|b| std::cmp::Reverse(b.1));
    by.truncate(8);
    by
}

/// A C program: the file at the path has another build id.
#[test]
fn a_c_binary_replaced_after_its_process_exited_keeps_its_addresses() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::c_program("short_lived", dir.path());
    let other = build::c_program("natural", dir.path());
    replaced_after_exit(&bin, &other, &["0"]);
}

/// A stripped Go program, which has no GNU build id: the file at the path
/// is another inode.
#[test]
fn a_go_binary_replaced_after_its_process_exited_keeps_its_addresses() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::stripped_go_program("brief", dir.path());
    let other = support::go::build_split(Path::new("go"), dir.path(), "split", true);
    replaced_after_exit(&bin, &other, &[]);
}

/// A stripped C program (as distributions ship it) deleted after its
/// process exited: its debug file, found by the build id the daemon
/// recorded, names its frames without the binary.
#[test]
fn a_deleted_binary_is_named_from_its_debug_file_by_build_id() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let stripped = build::stripped_c_program("short_lived", dir.path(), &scratch);
    let debug_dir = dir.path().join("debug");
    let at = debug_dir
        .join(".build-id")
        .join(&stripped.build_id[..2])
        .join(format!("{}.debug", &stripped.build_id[2..]));
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::copy(&stripped.debug_file, &at).unwrap();
    let out = dir.path().join("out");
    let daemon = Profiler::start(&[
        "--all",
        "--debug-dir",
        debug_dir.to_str().unwrap(),
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    let run = Command::new(&stripped.bin)
        .args(["0.5", "0"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    let text = String::from_utf8_lossy(&run.stdout);
    let (_, fields) = text.trim().split_once(' ').unwrap();
    let fields: std::collections::HashMap<String, u64> = profiler_fixtures::client::fields(fields);
    let pid = u32::try_from(fields["pid"]).unwrap();
    std::fs::remove_file(&stripped.bin).unwrap();
    daemon.stop();

    let bin = stripped.bin.to_str().unwrap();
    let (mut samples, mut in_brief_work) = (0, 0);
    for (_, p) in &profiles(&out) {
        for s in p.samples_of(pid) {
            samples += p.value(s, "samples");
            if p.user_frames(s).contains(&("brief_work", bin)) {
                in_brief_work += p.value(s, "samples");
            }
        }
    }
    assert!(samples > 25, "{samples} samples of the fixture");
    assert!(
        in_brief_work * 10 >= samples * 8,
        "{in_brief_work} of {samples} samples named brief_work from the debug file"
    );
}

//! Frames left unnamed are counted by cause: a binary deleted after its
//! process exited (`binary_gone`), and every profile's unnamed frames add
//! up with its named ones to all of its user frames.
mod support;

use std::path::Path;

use support::{Fixture, Profiler, profiles, require_root};

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

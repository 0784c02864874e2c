//! A real-kernel test of names for code outside any file: a JIT's
//! functions, named from the perf map it writes (`node --perf-basic-prof`).
mod support;

use std::{fs, path::Path, process::Command};

use support::{Fixture, profile_fixture, require_root, sum};

#[test]
fn node_jit_functions_are_named_from_its_perf_map() {
    require_root();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiler-fixtures/js/hot.js");
    let out = tempfile::tempdir().unwrap();
    let mut command = Command::new("node");
    // V8 also writes an isolate log into its working directory.
    command
        .arg("--perf-basic-prof")
        .arg(&script)
        .arg("4")
        .current_dir(out.path());
    let mut fixture = Fixture::spawn_command(command);
    let pid = fixture.pid();
    let (truth, profiles) = profile_fixture(
        &mut fixture,
        &out.path().join("profiles"),
        &["--no-off-cpu"],
    );
    drop(fixture);
    let _ = fs::remove_file(format!("/tmp/perf-{pid}.map"));

    assert!(
        truth["hot_ms"] >= 3_900,
        "hotSpin ran {} ms",
        truth["hot_ms"]
    );
    let main = sum(&profiles, "samples", |p, s| p.is_thread(s, pid));
    let hot = sum(&profiles, "samples", |p, s| {
        p.is_thread(s, pid) && p.functions(s).iter().any(|f| f.contains("hotSpin"))
    });
    // ~400 samples in 4 s at 99 Hz, nearly all in hotSpin's compiled code;
    // without the perf map none of them names it.
    assert!(main > 200, "only {main} samples of node's main thread");
    assert!(
        hot * 10 >= main * 8,
        "{hot} of {main} samples of node's main thread under hotSpin"
    );
}

//! The shipped systemd unit's capability set is enough: the profiler,
//! restricted to exactly `CapabilityBoundingSet=` of
//! packaging/profiler.service (as root, like the unit), profiles and
//! symbolizes a fixture.
mod support;

use std::process::Command;

use support::{Fixture, profiles, require_root};

/// `CAP_BPF CAP_PERFMON ...` from the unit, as setpriv's `+bpf,+perfmon,...`.
fn unit_capabilities() -> String {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../packaging/profiler.service"
    ))
    .unwrap();
    let caps = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("the unit sets CapabilityBoundingSet");
    caps.split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn the_units_capabilities_are_enough() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let mut fixture = Fixture::spawn("spin_sleep", 5.0);
    fixture.go();
    let out = Command::new("setpriv")
        .arg(format!("--bounding-set=-all,{}", unit_capabilities()))
        .arg("--no-new-privs")
        .arg(env!("CARGO_BIN_EXE_profiler"))
        .args(["--pid", &fixture.pid().to_string(), "--output-dir"])
        .arg(dir.path())
        .args(["--duration", "2s"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let profiles = profiles(dir.path());
    let p = &profiles[0].1;
    let functions: Vec<&str> = p.0.sample.iter().flat_map(|s| p.functions(s)).collect();
    assert!(
        functions.iter().any(|f| f.ends_with("spin_span")),
        "on-CPU stacks symbolized"
    );
    assert!(
        functions.iter().any(|f| f.ends_with("sleep_span")),
        "off-CPU stacks symbolized"
    );
}

//! Under `--all` the daemon leaves its own waits out (its loop sleeping
//! between polls, rings and reads: keeping them cost a stack walk at most
//! of its wakeups), while another process's waits of the same kind are
//! in the profile, and the daemon's CPU stays visible when it is sampled.
mod support;

use std::process::Command;

use support::{Profiler, profiles, require_root};

#[test]
fn under_all_the_daemons_own_waits_are_left_out() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    // Another process that wakes as often as the daemon's loop does (a
    // 10 ms sleep in a shell loop), in view for the whole run.
    let mut sleeper = Command::new("sh")
        .args(["-c", "while :; do sleep 0.01; done"])
        .spawn()
        .unwrap();
    let mut running = Profiler::start(&[
        "--all",
        "--output-dir",
        dir.path().to_str().unwrap(),
        "--interval",
        "3s",
    ]);
    let daemon = running.pid();
    running.wait_for_files(dir.path(), 1);
    let log = running.stop();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let profiles = profiles(dir.path());
    assert!(!profiles.is_empty(), "{log}");
    let total = |pid: u32, ty: &str| -> i64 {
        profiles
            .iter()
            .flat_map(|(_, p)| p.samples_of(pid).map(|s| p.value(s, ty)))
            .sum()
    };
    let off_cpu = |pid: u32| total(pid, "off_cpu");
    assert_eq!(off_cpu(daemon), 0, "the daemon's own waits\n{log}");
    // Its first window's symbolization (kallsyms, every binary's names)
    // takes a hundred milliseconds of CPU or more: sampled at 99 Hz.
    assert!(total(daemon, "cpu") > 0, "the daemon's CPU\n{log}");
    // The sleeper's shell waits on its `sleep` children about as often.
    let shell = off_cpu(sleeper.id());
    assert!(
        shell > 1_000_000_000,
        "the shell's waits: {shell} ns\n{log}"
    );
}

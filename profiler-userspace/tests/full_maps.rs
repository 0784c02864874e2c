//! Real-kernel test of kernel maps filling up within one window: the
//! daemon drains them early, into the same window, rather than drop.
//!
//! `many_stacks.c` (plain `cc -O2`) sleeps once at the end of each of
//! 32,768 different call paths: twice as many distinct stacks as the stack
//! map holds (16,384), at ~7,000 a second. With every interval kept
//! (`--off-cpu-rate 0`) each sleep is one off-CPU event, so the fixture's
//! own count of sleeps is the ground truth. Without early drains the map
//! is full after about half of them and the rest are lost (counted in
//! `stack_map_full_drops`), which fails every check below.
mod support;

use std::{collections::HashSet, process::Command};

use profiler_common::maps::STACKS_MAX_ENTRIES;
use profiler_userspace::output::pprof::proto;
use support::{Fixture, build, profile_fixture, require_root, sum};

#[test]
#[expect(clippy::cast_precision_loss, reason = "event counts")]
fn more_stacks_than_the_maps_hold_are_all_kept_in_one_file() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::c_program("many_stacks", dir.path());
    let mut command = Command::new(&bin);
    command.arg("15");
    let mut fixture = Fixture::spawn_command(command);
    let out = dir.path().join("profiles");
    let (truth, files) =
        profile_fixture(&mut fixture, &out, &["--no-on-cpu", "--off-cpu-rate", "0"]);
    assert_eq!(files.len(), 1, "one window, one file");
    let profile = &files[0].1;
    assert_eq!(profile.comment_value("stack_map_full_drops"), 0);
    assert_eq!(profile.comment_value("map_full_drops"), 0);
    assert!(profile.comment_value("early_drains") >= 1);

    let at_leaf = |p: &support::Profile, s: &proto::Sample| {
        p.str_label(s, "state") == Some("sleeping") && p.functions(s).contains(&"leaf")
    };
    let stacks: HashSet<&Vec<u64>> = profile
        .0
        .sample
        .iter()
        .filter(|s| at_leaf(profile, s))
        .map(|s| &s.location_id)
        .collect();
    assert!(
        stacks.len() > STACKS_MAX_ENTRIES as usize,
        "{} distinct stacks at the leaf, more than the map's {STACKS_MAX_ENTRIES}",
        stacks.len()
    );
    let events = sum(&files, "off_cpu_events", at_leaf);
    let leaves = truth["leaves"];
    assert!(
        (0.98..1.02).contains(&(events as f64 / leaves as f64)),
        "{events} sleeping events at the leaf for {leaves} sleeps"
    );
}

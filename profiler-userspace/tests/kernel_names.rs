//! A real-kernel test of kernel names for code loaded after the daemon
//! read `/proc/kallsyms`: a BPF program another tool loads later.
mod support;

use std::time::Duration;

use support::{Fixture, Profiler, profiles, require_root};

/// The program of the second profiler that runs in the system-call loop's
/// own context, with interrupts on, where the first one's samples land:
/// its `sys_exit` hook.
const LATE_PROGRAM: &str = "_sys_exit";

#[test]
fn a_bpf_program_loaded_after_kallsyms_was_read_is_named_by_its_record() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let mut fixture = Fixture::spawn("syscalls", 8.0);
    let pid = fixture.pid().to_string();
    let mut first = Profiler::start(&[
        "--pid",
        &pid,
        "--no-off-cpu",
        "--frequency",
        "499",
        "--interval",
        "1s",
        "--output-dir",
        out.path().to_str().unwrap(),
    ]);
    fixture.go();
    // Two windows with the loop's kernel frames: kallsyms has been read.
    first.wait_for_files(out.path(), 2);
    let late = tempfile::tempdir().unwrap();
    let second = Profiler::start(&[
        "--pid",
        &pid,
        "--off-cpu-sys-exit",
        "--output-dir",
        late.path().to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_secs(4));
    second.stop();
    fixture.results();
    first.stop();

    let profiles = profiles(out.path());
    let leaves: Vec<&str> = profiles
        .iter()
        .flat_map(|(_, p)| {
            p.samples_of(fixture.pid())
                .filter_map(|s| p.functions(s).first().copied())
        })
        .collect();
    let in_bpf: Vec<&str> = leaves
        .iter()
        .copied()
        .filter(|f| f.starts_with("bpf_prog_"))
        .collect();
    let late_program = in_bpf.iter().filter(|f| f.ends_with(LATE_PROGRAM)).count();
    // At 499 Hz for 4 s, the hook's share of the loop gives dozens. Named
    // from a kallsyms read before it was loaded, its addresses took the
    // name of the symbol below them: another program.
    assert!(
        late_program >= 10,
        "{late_program} of {} samples of the loop with their leaf in the late program; BPF leaves: {:?}",
        leaves.len(),
        summary(&in_bpf)
    );
    assert!(
        late_program * 10 >= in_bpf.len() * 9,
        "BPF leaves other than the late program: {:?}",
        summary(&in_bpf)
    );
}

/// Each distinct name with its count.
fn summary<'a>(names: &[&'a str]) -> Vec<(&'a str, usize)> {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for name in names {
        *counts.entry(name).or_default() += 1;
    }
    counts.into_iter().collect()
}

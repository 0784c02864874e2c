//! The checks the host's tests and the VM suite (`vm_kernel.rs`) share,
//! with their tolerances: one copy of each, so the VM checks the 6.1
//! kernel exactly as the host is checked.
use std::{collections::HashMap, path::PathBuf};

use super::profile::{Profile, share, sum};

/// Sum of value `ty` over thread `tid`'s samples whose stack holds
/// `function` (any stack when empty).
pub fn thread_total(profiles: &[(PathBuf, Profile)], tid: u32, function: &str, ty: &str) -> i64 {
    sum(profiles, ty, |p, s| {
        p.is_thread(s, tid) && (function.is_empty() || p.functions(s).contains(&function))
    })
}

/// The frameless leaf `spin` of `natural` (plain `cc -O2`) on thread
/// `cpu`: both its callers found for 90% of its samples (a frame-pointer
/// walk goes from `spin` straight to the thread's start and finds
/// neither), and `cpu_heavy`'s share within 4 points of what the fixture
/// measured (`truth`'s `heavy_ns` and `light_ns`). Returns `spin`'s
/// samples.
///
/// With ~5,000 samples the share's standard error is ~0.6 points (ten
/// host runs spread 0.7), so 4 points is over 5 sigma, while a wrong
/// attribution (all to one caller, or a 50/50 split) is off by 25 points
/// or more.
pub fn callers_of_a_frameless_leaf(
    label: &str,
    profiles: &[(PathBuf, Profile)],
    cpu: u32,
    truth: &HashMap<String, u64>,
) -> i64 {
    let heavy = thread_total(profiles, cpu, "cpu_heavy", "samples");
    let light = thread_total(profiles, cpu, "cpu_light", "samples");
    let spin = thread_total(profiles, cpu, "spin", "samples");
    assert!(
        heavy + light >= spin * 9 / 10,
        "{label}: callers of spin: heavy {heavy} + light {light} of {spin}"
    );
    let measured = share(heavy, light);
    let expected = share(
        i64::try_from(truth["heavy_ns"]).unwrap(),
        i64::try_from(truth["light_ns"]).unwrap(),
    );
    eprintln!("{label}: cpu_heavy {measured:.1}% of {spin} samples, measured {expected:.1}%");
    assert!(
        (measured - expected).abs() <= 4.0,
        "{label}: cpu_heavy {measured:.1}% ({spin} samples in spin) vs the fixture's own {expected:.1}%"
    );
    spin
}

/// Thread `tid`'s off-CPU time under `function` within 15% of what the
/// fixture measured (`truth_ns`): the tolerance covers wakeup latency at
/// the windows' ends. Returns the off-CPU time.
pub fn off_cpu_as_measured(
    label: &str,
    profiles: &[(PathBuf, Profile)],
    tid: u32,
    function: &str,
    truth_ns: u64,
) -> i64 {
    let off = thread_total(profiles, tid, function, "off_cpu");
    #[expect(clippy::cast_precision_loss, reason = "nanosecond totals")]
    let ratio = off as f64 / truth_ns as f64;
    eprintln!("{label}: {function}: {ratio:.3} of what it measured");
    assert!(
        (0.85..=1.15).contains(&ratio),
        "{label}: {function}: off_cpu {off} ns vs the fixture's own {truth_ns} ns"
    );
    off
}

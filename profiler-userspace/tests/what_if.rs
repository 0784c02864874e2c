//! Real-kernel test of `--what-if`: the estimate one window gives of how
//! much faster a thread would go if a function took half its time, held
//! to the change measured when the function really takes half its time.
//!
//! The fixture is `whatif.c` at plain `cc -O2`: threads a, b and c serve
//! rounds, c's `c_compute` taking as long as the test says, in two
//! shapes: `serial` (a asks b, b asks c, one round in flight: a round is
//! the sum of the three) and `pipeline` (c computes back to back, b and a
//! forward: the slowest stage sets the pace). Thread a counts the rounds,
//! which every thread makes alike: each thread's estimate is held to them.
mod support;

use std::process::Command;

use support::{Fixture, build, profile_fixture, require_root};

/// Rounds a second of one run of `bin SHAPE C_MICROS AB_MICROS` under
/// the profiler with `--wakers --what-if c_compute:50`, and the estimates
/// the window gave for threads a, b and c.
fn run(bin: &std::path::Path, shape: &str, c_us: u32, ab_us: u32) -> (f64, [f64; 3]) {
    let mut command = Command::new(bin);
    command.args(["3", shape, &c_us.to_string(), &ab_us.to_string()]);
    let mut fixture = Fixture::spawn_command(command);
    let out = tempfile::tempdir().unwrap();
    let (truth, profiles) = profile_fixture(
        &mut fixture,
        out.path(),
        &[
            "--wakers",
            "--off-cpu-rate",
            "1ms",
            "--what-if",
            "c_compute:50",
        ],
    );
    #[expect(clippy::cast_precision_loss, reason = "rounds and nanoseconds")]
    let rounds_a_second = truth["rounds"] as f64 / truth["run_ns"] as f64 * 1e9;
    let comments = profiles[0].1.comments();
    let estimate = |thread: &str| {
        let named = format!("={thread}:{} ", truth[thread]);
        comments
            .iter()
            .find(|c| c.starts_with("what_if_") && c.contains(&named))
            .and_then(|c| c.rsplit_once(' '))
            .and_then(|(_, pct)| pct.trim_end_matches('%').parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{shape}: no estimate for thread {thread} in {comments:?}"))
            / 100.0
    };
    (rounds_a_second, ["a", "b", "c"].map(estimate))
}

#[test]
fn what_if_estimates_the_speed_up_of_a_function_twice_as_fast() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::c_program("whatif", dir.path());
    let mut failures = Vec::new();
    // a round: serial 0.5 + 0.5 + 2 ms -> 0.5 + 0.5 + 1 (+50%); pipeline
    // max(2, 0.2, 0.2) ms -> max(1, 0.2, 0.2) (+100%).
    for (shape, ab_us) in [("serial", 500), ("pipeline", 200)] {
        let (before, estimates) = run(&bin, shape, 2000, ab_us);
        let (after, _) = run(&bin, shape, 1000, ab_us);
        let measured = after / before - 1.0;
        let [a, b, c] = estimates.map(|e| e * 100.0);
        eprintln!(
            "{shape}: {before:.0} rounds/s, {after:.0} with c_compute at half: \
             {:+.1}% measured, estimated a {a:+.1}%, b {b:+.1}%, c {c:+.1}%",
            measured * 100.0,
        );
        for (thread, estimate) in ["a", "b", "c"].into_iter().zip(estimates) {
            if (estimate - measured).abs() > 0.2 * measured {
                failures.push(format!(
                    "{shape}: thread {thread} estimated {:+.1}%, measured {:+.1}% (within 20% of it)",
                    estimate * 100.0,
                    measured * 100.0
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

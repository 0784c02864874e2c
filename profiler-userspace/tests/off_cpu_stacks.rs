//! Real-kernel tests of where an off-CPU interval's user stack is taken.
//!
//! Every thread gets its stack on the way back to user space, exactly as
//! it blocked: by BPF task work, or, on kernels without it, at
//! `rseq_update` for threads registered with rseq (every glibc thread).
//! The C fixture in `unwinding.rs` checks waits in system calls, `states`
//! in `off_cpu.rs` checks preemption in user code. Here: a Go program,
//! whose runtime never registers rseq, with and without task work.
mod support;

use std::{path::PathBuf, process::Command};

use support::{
    Fixture, Profile, build, profile_fixture, profile_fixture_logged, require_root, sum,
};

/// What the profiles say about the Go fixture's napping thread.
struct Naps {
    /// off_cpu ns with `main.longNap` / `main.shortNap` on the stack.
    long: i64,
    short: i64,
    /// All of the thread's off_cpu ns.
    all: i64,
    /// `off_cpu_ns_approx_user_stack`, summed over the windows.
    approx: u64,
    /// What the thread measured in each nanosleep.
    measured_long: u64,
    measured_short: u64,
    /// Whether the daemon said this kernel refuses its task work.
    task_work_refused: bool,
}

impl Naps {
    fn measure(extra_args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin = build::go_program("naps", dir.path());
        let out_dir = dir.path().join("profiles");
        let mut command = Command::new(&bin);
        command.arg("4");
        let mut fixture = Fixture::spawn_command(command);
        let napper = fixture.tid("napper");
        // At 1 ms every nap (10 and 30 ms) is kept, with margin.
        let args = [&["--off-cpu-rate", "1ms"], extra_args].concat();
        let (truth, profiles, log) = profile_fixture_logged(&mut fixture, &out_dir, &args);
        let naps = Self {
            long: off_cpu_under(&profiles, napper, "main.longNap"),
            short: off_cpu_under(&profiles, napper, "main.shortNap"),
            all: off_cpu_under(&profiles, napper, ""),
            approx: profiles
                .iter()
                .map(|(_, p)| p.comment_value("off_cpu_ns_approx_user_stack"))
                .sum(),
            measured_long: truth["long_ns"],
            measured_short: truth["short_ns"],
            task_work_refused: log.contains("refuses BPF task work"),
        };
        eprintln!(
            "{extra_args:?}: longNap {} ns, shortNap {} ns, all {} ns, approx {} ns; \
             measured {} + {} ns",
            naps.long, naps.short, naps.all, naps.approx, naps.measured_long, naps.measured_short
        );
        naps
    }

    /// Both sites' off-CPU time against what the thread measured.
    #[expect(clippy::cast_precision_loss, reason = "ratios of nanoseconds")]
    fn total_ratio(&self) -> f64 {
        (self.long + self.short) as f64 / (self.measured_long + self.measured_short) as f64
    }

    /// main.longNap's share of the two sites, in the profile and measured.
    #[expect(clippy::cast_precision_loss, reason = "ratios of nanoseconds")]
    fn long_share(&self) -> (f64, f64) {
        (
            self.long as f64 / (self.long + self.short) as f64 * 100.0,
            self.measured_long as f64 / (self.measured_long + self.measured_short) as f64 * 100.0,
        )
    }
}

/// off_cpu ns of thread `tid` in samples whose stack holds `function`
/// (any stack when empty).
fn off_cpu_under(profiles: &[(PathBuf, Profile)], tid: u32, function: &str) -> i64 {
    sum(profiles, "off_cpu", |p, s| {
        p.is_thread(s, tid) && (function.is_empty() || p.functions(s).contains(&function))
    })
}

impl Naps {
    /// Both sites' time matches what the thread measured, under its own
    /// site: each nap's weight carries the stack it blocked with. Flushed
    /// at the next switch-out instead, each nap would be charged to the
    /// other site and the long share would be about 25% instead of 75%.
    fn assert_exact(&self) {
        let ratio = self.total_ratio();
        assert!(
            (ratio - 1.0).abs() <= 0.15,
            "the napping thread's off-CPU time is {ratio:.3} of what it measured"
        );
        let (ours, measured) = self.long_share();
        assert!(
            (ours - measured).abs() <= 5.0,
            "main.longNap: {ours:.1}% of the naps here, {measured:.1}% measured"
        );
        #[expect(clippy::cast_sign_loss, reason = "a sum of positive weights")]
        let all = self.all as u64;
        assert!(
            self.approx * 20 <= all,
            "approximate user stacks counted for {} ns of {all} ns",
            self.approx
        );
    }

    /// Without task work or `sys_exit`, the thread's pending weight is
    /// flushed at its next switch-out: its total is right, and the weight
    /// with such stacks is counted as approximate.
    fn assert_approximate(&self) {
        let ratio = self.total_ratio();
        assert!(
            (ratio - 1.0).abs() <= 0.15,
            "the napping thread's off-CPU time is {ratio:.3} of what it measured"
        );
        assert!(
            self.approx > 0,
            "no weight counted as off_cpu_ns_approx_user_stack"
        );
    }
}

/// By default `sched_switch` schedules the flush of a kept interval for
/// the thread's way back to user space by BPF task work: exact stacks
/// without rseq, and without the `sys_exit` hook. Where the kernel's
/// verifier refuses the task work (6.18 stable kernels that take its
/// callback as sleepable, and so only from sleepable programs), the
/// daemon says so and takes stacks at `rseq_update`, as before 6.18.
#[test]
fn a_go_thread_gets_the_stack_it_blocked_with_by_task_work_where_the_kernel_takes_it() {
    require_root();
    let naps = Naps::measure(&[]);
    if naps.task_work_refused {
        eprintln!("this kernel refuses BPF task work from sched_switch");
        naps.assert_approximate();
    } else {
        naps.assert_exact();
    }
}

// Without task work, on kernels before 6.18, a thread without rseq has
// its pending weight flushed at its next switch-out: `vm_kernel.rs` checks
// that on Debian 12's 6.1 itself (the time all there, counted as
// approximate), as the test above does where the kernel refuses it.

/// `--off-cpu-sys-exit` (no task work: rseq_update and sys_exit) flushes the same thread's waits
/// in system calls as the call returns: exact stacks again.
#[test]
fn without_task_work_sys_exit_gives_a_go_thread_the_stack_it_blocked_with() {
    require_root();
    Naps::measure(&["--off-cpu-sys-exit"]).assert_exact();
}

/// The cpu-clock sampler fires from a timer interrupt, which can land
/// while the flush on the way back to user space (task work, or
/// `rseq_update`) is walking a user stack on the same CPU. Each needs
/// its own per-CPU walk state and scratch trace: when they shared one,
/// `natural.c` (a thread blocking ~500 times a second, another spinning)
/// under 99 Hz sampling got about one off-CPU row in sixteen whose "user"
/// part was the sampler's kernel stack (BPF programs, the rseq exit path)
/// glued to the blocked thread's user frames. Sampling at 999 Hz makes
/// that ten times likelier; the check is that no stack ever mixes them.
#[test]
fn an_interrupting_sample_never_mixes_into_an_off_cpu_stack() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::c_program("natural", dir.path());
    let mut fixture = Fixture::spawn_path(&bin, 4.0);
    let (_, profiles) = profile_fixture(
        &mut fixture,
        &dir.path().join("profiles"),
        &["--frequency", "999"],
    );
    let (mut rows, mut mixed) = (0, Vec::new());
    for (_, p) in &profiles {
        for sample in &p.0.sample {
            rows += 1;
            if !p.kernel_then_user(sample) {
                mixed.push(p.functions(sample).join(" < "));
            }
        }
    }
    assert!(rows > 20, "only {rows} rows");
    assert!(
        mixed.is_empty(),
        "{} of {rows} rows mix kernel addresses into their user part:\n{}",
        mixed.len(),
        mixed.join("\n")
    );
}

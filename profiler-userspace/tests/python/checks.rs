//! The checks of one interpreter's run in the profile (`python.rs`).
use std::collections::HashMap;

use profiler_userspace::output::pprof::proto::Sample;

use super::{Run, UNITS, py_spy_units};
use crate::support::{Profile, shares};

/// What is wrong with `run`'s part of `profile`.
pub(super) fn check(profile: &Profile, run: &Run) -> Vec<String> {
    let part = Part {
        profile,
        run,
        samples: profile.samples_of(run.fixture.pid()).collect(),
    };
    let mut failures = part.python_frames();
    failures.extend(part.units());
    failures.extend(part.off_cpu());
    failures.extend(part.gil());
    failures.extend(part.zlib());
    failures
}

/// One run's samples in the profile.
struct Part<'a> {
    profile: &'a Profile,
    run: &'a Run,
    samples: Vec<&'a Sample>,
}

impl Part<'_> {
    /// The share (%) of weight `ty` of the samples `keep` takes that `has`
    /// takes too, and their total.
    fn share(
        &self,
        ty: &str,
        keep: impl Fn(&Sample) -> bool,
        has: impl Fn(&Sample) -> bool,
    ) -> (f64, i64) {
        let (with, all) = self
            .samples
            .iter()
            .filter(|s| keep(s))
            .fold((0, 0), |(w, a), s| {
                let n = self.profile.value(s, ty);
                (w + if has(s) { n } else { 0 }, a + n)
            });
        #[expect(clippy::cast_precision_loss, reason = "a percentage")]
        let share = with as f64 / all.max(1) as f64 * 100.0;
        (share, all)
    }

    fn under(&self, s: &Sample, tid: u32, function: &str) -> bool {
        self.profile.is_thread(s, tid) && self.profile.functions(s).contains(&function)
    }

    /// Python frames on the Python threads' on-CPU samples.
    fn python_frames(&self) -> Vec<String> {
        let (share, all) = self.share("samples", |_| true, |s| self.profile.has_python_frame(s));
        eprintln!(
            "{}: {share:.2}% of {all} on-CPU samples with a Python frame",
            self.run.label
        );
        if share < 99.0 {
            return vec![format!(
                "{share:.1}% of {all} on-CPU samples have a Python frame"
            )];
        }
        Vec::new()
    }

    /// The units' shares of the main thread: the profiler's, the truth's,
    /// py-spy's.
    fn units(&self) -> Vec<String> {
        let main = self.run.fixture.tid("main");
        let mut ours: HashMap<&str, u64> = HashMap::new();
        for s in self
            .samples
            .iter()
            .filter(|s| self.profile.is_thread(s, main))
        {
            let functions = self.profile.functions(s);
            if let Some(unit) = UNITS.iter().find(|u| functions.contains(u)) {
                *ours.entry(*unit).or_default() +=
                    u64::try_from(self.profile.value(s, "samples")).unwrap();
            }
        }
        let truth: HashMap<&str, u64> = UNITS
            .iter()
            .map(|u| (*u, self.run.truth[&format!("{u}_ns")]))
            .collect();
        let spy = py_spy_units(&self.run.py_spy_out);
        let (ours, truth, spy) = (
            shares(&ours, &UNITS),
            shares(&truth, &UNITS),
            shares(&spy, &UNITS),
        );
        let mut failures = Vec::new();
        for (i, unit) in UNITS.iter().enumerate() {
            eprintln!(
                "{}: {unit} {:.1}% (truth {:.1}%, py-spy {:.1}%)",
                self.run.label, ours[i], truth[i], spy[i]
            );
            if (ours[i] - truth[i]).abs() > 3.0 || (ours[i] - spy[i]).abs() > 3.0 {
                failures.push(format!(
                    "{unit}: {:.1}% of the units' samples, truth {:.1}%, py-spy {:.1}%",
                    ours[i], truth[i], spy[i]
                ));
            }
        }
        failures
    }

    /// Off-CPU under the waiting functions, against their measured time.
    fn off_cpu(&self) -> Vec<String> {
        let mut failures = Vec::new();
        for function in ["waiter", "reader"] {
            let tid = self.run.fixture.tid(function);
            let off: i64 = self
                .samples
                .iter()
                .filter(|s| self.under(s, tid, function))
                .map(|s| self.profile.value(s, "off_cpu"))
                .sum();
            let measured = self.run.truth[&format!("{function}_ns")];
            #[expect(clippy::cast_precision_loss, reason = "a ratio")]
            let ratio = off as f64 / measured as f64;
            eprintln!(
                "{}: off-CPU under {function}: {ratio:.3} of measured",
                self.run.label
            );
            if !(0.9..=1.1).contains(&ratio) {
                failures.push(format!(
                    "{function}: {off} ns off-CPU under it, measured {measured} ns ({ratio:.3}); \
                     the thread's off-CPU time went to {}",
                    self.off_cpu_of(tid)
                ));
            }
        }
        failures
    }

    /// Thread `tid`'s heaviest off-CPU samples, with their stacks (leaf
    /// first) and the profile's counts of Python walks that failed: where
    /// its time went when not where expected.
    fn off_cpu_of(&self, tid: u32) -> String {
        let mut mine: Vec<(i64, Vec<&str>)> = self
            .samples
            .iter()
            .filter(|s| self.profile.is_thread(s, tid))
            .map(|s| (self.profile.value(s, "off_cpu"), self.profile.functions(s)))
            .filter(|(off, _)| *off > 0)
            .collect();
        mine.sort_by_key(|(off, _)| -off);
        mine.truncate(4);
        let counts: Vec<String> = [
            "python_threads_not_found",
            "python_chains_torn",
            "early_drains",
            "off_cpu_in_flight_tracked",
            "off_cpu_ns_approx_user_stack",
            "off_cpu_task_work_unscheduled",
        ]
        .iter()
        .map(|c| format!("{c}={}", self.profile.comment_value(c)))
        .collect();
        format!("{mine:?} ({})", counts.join(" "))
    }

    /// The GIL: held by the main thread's pure-Python units on the CPU,
    /// released by the sleeping thread.
    fn gil(&self) -> Vec<String> {
        let (main, waiter) = (self.run.fixture.tid("main"), self.run.fixture.tid("waiter"));
        let mut failures = Vec::new();
        for (what, tid, function, ty, value) in [
            ("heavy on the CPU", main, "heavy", "samples", "holds"),
            ("light on the CPU", main, "light", "samples", "holds"),
            ("waiter asleep", waiter, "waiter", "off_cpu", "released"),
        ] {
            let (share, all) = self.share(
                ty,
                |s| self.under(s, tid, function),
                |s| self.profile.str_label(s, "gil") == Some(value),
            );
            eprintln!("{}: {what}: {share:.1}% gil={value}", self.run.label);
            if share < 95.0 || all == 0 {
                failures.push(format!("{what}: {share:.1}% of {all} with gil={value}"));
            }
        }
        failures
    }

    /// zlib's native frames between `squeeze` (above them) and the leaf,
    /// and `compute` above `squeeze`.
    fn zlib(&self) -> Vec<String> {
        let mut failures = Vec::new();
        let mut squeezed = 0;
        for s in self
            .samples
            .iter()
            .filter(|s| self.profile.functions(s).contains(&"squeeze"))
        {
            let functions = self.profile.functions(s);
            let at = |name: &str| functions.iter().position(|f| *f == name);
            let zlib = functions
                .iter()
                .position(|f| f.contains("deflate") || f.contains("zlib_compress"));
            match (zlib, at("squeeze"), at("compute")) {
                (Some(z), Some(sq), Some(c)) if z < sq && sq < c => {
                    squeezed += self.profile.value(s, "samples");
                }
                (Some(_), _, _) => {
                    failures.push(format!("zlib's frames out of place: {functions:?}"));
                }
                _ => {}
            }
        }
        if squeezed == 0 {
            failures.push("no sample has zlib's frames under squeeze".to_owned());
        }
        failures
    }
}

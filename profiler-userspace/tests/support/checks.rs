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

/// What a run of `chanwake.go` measured of itself.
pub struct Chanwake {
    pub pid: u32,
    /// The consumer's time in `consumerWait`.
    pub waited_ns: i64,
    /// From each send to the relay's and the consumer's receive returning
    /// (woken, waiting for a thread).
    pub relay_handoff_ns: i64,
    pub handoff_ns: i64,
    /// Items the consumer received.
    pub items: i64,
}

impl Chanwake {
    /// From the fixture's printed fields.
    pub fn of(field: impl Fn(&str) -> i64) -> Self {
        Self {
            pid: u32::try_from(field("pid")).unwrap(),
            waited_ns: field("waited_ns"),
            relay_handoff_ns: field("relay_handoff_ns"),
            handoff_ns: field("handoff_ns"),
            items: field("items"),
        }
    }
}

/// `chanwake.go`'s run with `--goroutine-wakers`: the consumer's waits as
/// the view saw them within 20% of what it measured (runnable time
/// included), each named once, 90% by `main.relaySend`'s goroutine; on
/// the critical path, the consumer's wait ends at the producer's code
/// through the relay then the producer for what the consumer waited less
/// the two handoffs (the relay's, which the path shows as `[waiting for a
/// CPU]`, and its own, not in its parked time), within 10% of its wait
/// (under [`Timing::Emulated`], through the relay to the producer's code or
/// to the relay's wait for a CPU for 70% of its critical path, and to the
/// producer's code for 20%); the
/// sleeper's naps, which a timer ends from the scheduler, 90% by the Go
/// runtime; the socket reader's waits 90% by the network poller.
/// Returns what failed.
pub fn goroutine_wakers(
    profiles: &[(PathBuf, Profile)],
    (version, run): (&str, &Chanwake),
    timing: Timing,
) -> Vec<String> {
    let (pid, waited_ns) = (run.pid, run.waited_ns);
    let mut failures = Vec::new();
    let consumer = Waits::of(profiles, pid, "main.consumerWait", "main.relaySend");
    let sleeper = Waits::of(profiles, pid, "main.sleeperNap", "");
    eprintln!(
        "{version}: consumer waited {waited_ns} ns by itself: {consumer:?}; sleeper: {sleeper:?}"
    );
    #[expect(clippy::cast_precision_loss, reason = "shares")]
    let part = |a: i64, b: i64| a as f64 / b.max(1) as f64;
    // The view's own reading of the waits, against the fixture's.
    let seen = part(consumer.parked + consumer.runnable, waited_ns);
    // Every wait the view saw, named once, nearly all by the relay.
    let named = part(consumer.total(), consumer.parked);
    let by_sender = part(consumer.with_frame, consumer.parked);
    if !(0.8..1.2).contains(&seen) || !(0.95..1.05).contains(&named) || by_sender < 0.9 {
        failures.push(format!(
            "{version}: the consumer's waits read {seen:.3} of its own, {named:.3} of them \
             named, {by_sender:.3} by main.relaySend: {consumer:?}"
        ));
    }
    let joints: Vec<&String> = consumer.by.keys().collect();
    if !consumer
        .by
        .keys()
        .any(|j| j.starts_with("[woken by goroutine "))
    {
        failures.push(format!(
            "{version}: no goroutine named as waker: {joints:?}"
        ));
    }
    // A timer wakes a sleeper from the scheduler (`checkTimers`, on the
    // thread's system stack): no goroutine is the waker.
    let by_runtime = part(
        sleeper
            .by
            .get("[woken by the Go runtime]")
            .copied()
            .unwrap_or(0),
        sleeper.parked,
    );
    if by_runtime < 0.9 {
        failures.push(format!(
            "{version}: {by_runtime:.3} of the sleeper's naps woken by the runtime: {sleeper:?}"
        ));
    }
    // A read on a socket ends when the network poller finds it ready.
    let reader = Waits::of(profiles, pid, "main.netRead", "");
    let by_poller = part(
        reader
            .by
            .get("[woken by the network poller]")
            .copied()
            .unwrap_or(0),
        reader.parked,
    );
    if by_poller < 0.9 {
        failures.push(format!(
            "{version}: {by_poller:.3} of the reader's waits woken by the poller: {reader:?}"
        ));
    }
    let (whole, clock) = clock_reads(profiles, pid);
    eprintln!("{version}: {whole} of {clock} on-CPU samples in time.now reach main's code");
    // A run may sample no clock read (4 to 18 of 300 here): nothing to hold.
    if clock != 0 && part(whole, clock) < 0.9 {
        failures.push(format!(
            "{version}: {whole} of {clock} on-CPU samples in time.now reach main's code \
             (at least 90%)"
        ));
    }
    // The critical path: the consumer waited on the relay, which waited on
    // the producer's compute.
    let path = CriticalPath::of(profiles, pid);
    if timing == Timing::Emulated {
        let followed = part(path.at_producer + path.relay_runnable, path.all);
        let at_producer = part(path.at_producer, path.all);
        eprintln!(
            "{version}: {followed:.3} of the consumer's critical path through the relay, {at_producer:.3} at the producer's code: {path:?}"
        );
        if followed < 0.7 || at_producer < 0.2 {
            failures.push(format!(
                "{version}: {followed:.3} of the consumer's critical path through the relay to \
                 the producer's code or the relay's wait for a CPU (at least 0.7), \
                 {at_producer:.3} to the producer's code (at least 0.2): {path:?}"
            ));
        }
        return failures;
    }
    let computing = waited_ns - run.relay_handoff_ns - run.handoff_ns;
    let off = part(path.at_producer - computing, waited_ns);
    eprintln!(
        "{version}: the consumer's critical path ends at the producer's code for {} ns, its \
         measured wait less the handoffs {computing} ns: {off:+.3} of its wait (the relay's \
         handoff {} ns, its [waiting for a CPU] end {} ns): {path:?}",
        path.at_producer, run.relay_handoff_ns, path.relay_runnable
    );
    if off.abs() > 0.1 {
        failures.push(format!(
            "{version}: the consumer's critical path ends at the producer's code through the \
             relay for {} ns, its measured wait less the handoffs {computing} ns: {off:+.3} of \
             its wait {waited_ns} ns (at most 0.1 either way): {path:?}",
            path.at_producer
        ));
    }
    failures
}

/// How the machine that ran `chanwake.go` keeps time.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// A machine's own CPUs.
    Real,
    /// QEMU's TCG with one host thread for both vCPUs (the 6.1 VM): a
    /// goroutine readied on one vCPU waits for the other's time slice,
    /// milliseconds (a third of the consumer's wait there, where it is
    /// 3% here), and how that time splits between the producer's compute
    /// and the relay's wait for a CPU is the emulator's.
    Emulated,
}

/// The on-CPU samples of process `pid` in `time.now` that keep the
/// program's frames below it (mostly the producer's loop), and all of
/// them: Go reads the clock through the vDSO on the system stack.
fn clock_reads(profiles: &[(PathBuf, Profile)], pid: u32) -> (i64, i64) {
    let (mut clock, mut whole) = (0, 0);
    for (_, p) in profiles {
        for sample in p.samples_of(pid) {
            let functions = p.functions(sample);
            if p.value(sample, "samples") != 0 && functions.contains(&"time.now") {
                clock += p.value(sample, "samples");
                if functions.iter().any(|f| f.starts_with("main.")) {
                    whole += p.value(sample, "samples");
                }
            }
        }
    }
    (whole, clock)
}

/// The consumer's `critical_path` weight in a process.
#[derive(Debug, Default)]
struct CriticalPath {
    /// Ending in the producer's code through two goroutines (the relay,
    /// then the producer).
    at_producer: i64,
    /// Ending at the relay's `[waiting for a CPU]`.
    relay_runnable: i64,
    all: i64,
}

impl CriticalPath {
    fn of(profiles: &[(PathBuf, Profile)], pid: u32) -> Self {
        let mut path = Self::default();
        for (_, p) in profiles {
            for sample in p.samples_of(pid) {
                let weight = p.value(sample, "critical_path");
                let functions = p.functions(sample);
                if weight == 0 || !functions.contains(&"main.consumerWait") {
                    continue;
                }
                path.all += weight;
                let Some(at) = functions.iter().position(|f| f.starts_with("[woken by ")) else {
                    continue;
                };
                let hops = functions[at..]
                    .iter()
                    .take_while(|f| f.starts_with("[woken by goroutine "))
                    .count();
                if hops == 2 && !functions[0].starts_with('[') {
                    path.at_producer += weight;
                } else if hops == 1 && functions[0] == "[waiting for a CPU]" {
                    path.relay_runnable += weight;
                }
            }
        }
        path
    }
}

/// One process's goroutine weights under a parked function.
#[derive(Debug, Default)]
struct Waits {
    /// `goroutine` weight, parked (state waiting) under the function.
    parked: i64,
    /// `goroutine` weight runnable under it: woken, waiting for a thread
    /// (counted in the fixture's own time, not in the wakers' rows).
    runnable: i64,
    /// `goroutine_wakers` weight under it, by joint.
    by: HashMap<String, i64>,
    /// Of that, with `above` in the waker's part.
    with_frame: i64,
}

impl Waits {
    fn of(profiles: &[(PathBuf, Profile)], pid: u32, parked: &str, above: &str) -> Self {
        let mut waits = Waits::default();
        for (_, p) in profiles {
            for sample in p.samples_of(pid) {
                let functions = p.functions(sample);
                let joint = functions.iter().position(|f| f.starts_with("[woken by "));
                let Some(joint) = joint else {
                    if functions.contains(&parked) {
                        match p.str_label(sample, "state") {
                            Some("waiting") => waits.parked += p.value(sample, "goroutine"),
                            Some("runnable") => waits.runnable += p.value(sample, "goroutine"),
                            _ => {}
                        }
                    }
                    continue;
                };
                let weight = p.value(sample, "goroutine_wakers");
                if weight == 0 || !functions[joint..].contains(&parked) {
                    continue;
                }
                *waits.by.entry(functions[joint].to_owned()).or_default() += weight;
                if functions[..joint].contains(&above) {
                    waits.with_frame += weight;
                }
            }
        }
        waits
    }

    fn total(&self) -> i64 {
        self.by.values().sum()
    }
}

//! Real-kernel tests of `--wakers`: each kept blocked interval names what
//! woke it, in the `off_cpu_wakers` sample type (the blocked stack, a
//! `[woken by …]` frame, the waker's stack above it).
//!
//! The fixture is `wakers.c` at plain `cc -O2`: a consumer blocks in
//! `read` on a pipe that a producer writes after computing 1 to 3 ms; a
//! sleeper sleeps 3 ms at a time (a timer wakes it); a reader reads 4 KiB
//! with `O_DIRECT` from a file on the disk (the completion wakes it). Each
//! measures its own off-CPU time, the truth the profile is held to. The
//! same program is checked on the host and in a container.
mod support;

use std::{collections::HashMap, path::Path, process::Command};

use support::{Fixture, Profile, build, container::Container, profile_fixture, require_root};

/// A thread's `off_cpu_wakers` weight, by the frame that joins its
/// blocked stack to its waker's, and how much of each has `above` (a
/// function) in the waker's part.
#[derive(Default, Debug)]
struct Woken {
    by: HashMap<String, i64>,
    with_frame: HashMap<String, i64>,
    total: i64,
    /// The thread's `off_cpu` weight in the sleeping and disk states.
    blocked: i64,
}

impl Woken {
    fn of(profiles: &[(std::path::PathBuf, Profile)], tid: u32, above: &[&str]) -> Self {
        let mut woken = Woken::default();
        for (_, p) in profiles {
            for sample in &p.0.sample {
                if p.num_label(sample, "tid") != Some(i64::from(tid)) {
                    continue;
                }
                if matches!(p.str_label(sample, "state"), Some("sleeping" | "disk")) {
                    woken.blocked += p.value(sample, "off_cpu");
                }
                let weight = p.value(sample, "off_cpu_wakers");
                if weight == 0 {
                    continue;
                }
                let functions = p.functions(sample);
                let joint = functions
                    .iter()
                    .position(|f| f.starts_with("[woken by "))
                    .expect("a waker row has its joint");
                woken.total += weight;
                *woken.by.entry(functions[joint].to_owned()).or_default() += weight;
                if functions[..joint].iter().any(|f| above.contains(f)) {
                    *woken
                        .with_frame
                        .entry(functions[joint].to_owned())
                        .or_default() += weight;
                }
            }
        }
        woken
    }

    fn with_frame(&self, joint: &str) -> i64 {
        self.with_frame.get(joint).copied().unwrap_or(0)
    }
}

#[expect(clippy::cast_precision_loss, reason = "nanoseconds, for ratios")]
fn ratio(part: i64, whole: u64) -> f64 {
    part as f64 / whole as f64
}

#[test]
fn blocked_time_names_what_woke_it() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::c_program("wakers", dir.path());
    let mut command = Command::new(&bin);
    command.arg("4").current_dir(dir.path());
    let mut fixture = Fixture::spawn_command(command);
    let failures = wakers_named(&mut fixture, &dir.path().join("profiles"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The same program in a container (its own mount and pid namespaces, an
/// overlayfs root, its file for `O_DIRECT` in the root's upper layer on
/// the disk): the same wakers, the producer named by its host tid.
#[test]
fn blocked_time_in_a_container_names_what_woke_it() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::c_program("wakers", dir.path());
    let container = Container::new(&dir.path().join("root"));
    container.add(&bin, "srv/wakers");
    container.add_libc();
    let mut fixture =
        Fixture::spawn_command(container.command(&["/srv/wakers".into(), "4".into()]));
    fixture.ids_as_the_host_sees("wakers");
    let failures = wakers_named(&mut fixture, &dir.path().join("profiles"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Profiles `fixture` (`wakers.c`) with `--wakers` into `out`: what is
/// wrong with the wakers its threads' blocked time names.
fn wakers_named(fixture: &mut Fixture, out: &Path) -> Vec<String> {
    let tids = ["producer", "consumer", "sleeper", "disk"].map(|name| fixture.tid(name));
    let [producer, consumer, sleeper, disk] = tids;
    // At 1 ms every wait of the consumer (1 to 3 ms) and the sleeper (3 ms)
    // is kept: their checks are exact. The disk's (tens of microseconds)
    // are sampled, kept about once in thirty.
    let (truth, profiles) = profile_fixture(fixture, out, &["--wakers", "--off-cpu-rate", "1ms"]);
    let mut failures = Vec::new();

    // The consumer waits for the producer's write, and nothing else.
    let woken = Woken::of(&profiles, consumer, &["producer_write"]);
    let by_producer = format!("[woken by producer:{producer}]");
    let share = ratio(woken.with_frame(&by_producer), truth["consumer_ns"]);
    eprintln!(
        "consumer: {share:.3} of {} ns, {woken:?}",
        truth["consumer_ns"]
    );
    if share < 0.9 {
        failures.push(format!(
            "consumer: {share:.3} of its measured wait under {by_producer} with \
             producer_write above (at least 0.9): {woken:?}"
        ));
    }
    if ratio(woken.total, truth["consumer_ns"]) > 1.1 {
        failures.push(format!(
            "consumer: off_cpu_wakers {} ns over its measured {} ns",
            woken.total, truth["consumer_ns"]
        ));
    }
    // Every blocked nanosecond has a waker row: the same time, drawn
    // another way (rows still off-CPU at a window's end have neither).
    if woken.total != woken.blocked {
        failures.push(format!(
            "consumer: off_cpu_wakers {} ns, its blocked off_cpu {} ns",
            woken.total, woken.blocked
        ));
    }

    // A timer wakes the sleeper: in an interrupt, on whatever task ran.
    let woken = Woken::of(&profiles, sleeper, &["hrtimer_wakeup"]);
    let share = ratio(woken.with_frame("[woken by timer]"), truth["sleeper_ns"]);
    eprintln!(
        "sleeper: {share:.3} of {} ns, {woken:?}",
        truth["sleeper_ns"]
    );
    if share < 0.9 {
        failures.push(format!(
            "sleeper: {share:.3} of its measured sleep under [woken by timer] \
             with hrtimer_wakeup above (at least 0.9): {woken:?}"
        ));
    }

    // The disk's completion wakes the reader, through the block layer.
    let block_layer = ["blk_mq_end_request", "blk_update_request", "bio_endio"];
    let woken = Woken::of(&profiles, disk, &block_layer);
    let share = ratio(woken.with_frame("[woken by disk]"), truth["disk_ns"]);
    eprintln!("disk: {share:.3} of {} ns, {woken:?}", truth["disk_ns"]);
    if share < 0.8 {
        failures.push(format!(
            "disk: {share:.3} of its measured wait under [woken by disk] with \
             the block layer above (at least 0.8): {woken:?}"
        ));
    }
    failures
}

/// A three-stage chain (`chain.c`): `a` waits on a pipe for `b`, which
/// waits on a condition variable for `c`, which computes. On the critical
/// path, `a`'s blocked time ends at `c_compute`, through `b` then `c`, as
/// much of it as `a` measured waiting (within 10%).
#[test]
fn a_chain_of_waits_ends_at_the_compute_it_waited_for() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = build::c_program("chain", dir.path());
    let mut command = Command::new(&bin);
    command.arg("4");
    let mut fixture = Fixture::spawn_command(command);
    let [a, b, c] = ["a", "b", "c"].map(|name| fixture.tid(name));
    let (truth, profiles) = profile_fixture(
        &mut fixture,
        &dir.path().join("profiles"),
        &["--wakers", "--off-cpu-rate", "1ms"],
    );
    let chain = [format!("[woken by c:{c}]"), format!("[woken by b:{b}]")];
    let (mut on_path, mut all) = (0, 0);
    for (_, p) in &profiles {
        for sample in p.0.sample.iter().filter(|s| p.is_thread(s, a)) {
            let weight = p.value(sample, "critical_path");
            if weight == 0 {
                continue;
            }
            all += weight;
            let functions = p.functions(sample);
            let Some(at) = functions.iter().position(|f| f.starts_with("[woken by ")) else {
                continue;
            };
            let hops: Vec<&str> = functions[at..]
                .iter()
                .take_while(|f| f.starts_with("[woken by "))
                .copied()
                .collect();
            if functions[..at].contains(&"c_compute") && hops == chain {
                on_path += weight;
            }
        }
    }
    let share = ratio(on_path, truth["a_ns"]);
    eprintln!(
        "a: {share:.3} of its measured {} ns on the path to c_compute ({all} ns in all)",
        truth["a_ns"]
    );
    assert!(
        (0.9..=1.1).contains(&share),
        "a: {share:.3} of its measured wait ends at c_compute through b then c \
         (within 10% of 1); {all} ns of critical path in all"
    );
    for (_, p) in &profiles {
        assert!(
            p.comments()
                .iter()
                .any(|c| c.starts_with("critical_path_top_1=c:")),
            "the window's top end is c's code: {:?}",
            p.comments()
        );
    }
}

use profiler_common::sample::ThreadState;

use super::*;
use crate::assemble::{
    critical_path::{Waits, thread_times},
    test_rows::{by, goroutine, goroutine_waits, row, running},
    wakers::WaitedOn,
};

const MS: u64 = 1_000_000;

/// Rows and their wakers: (tid, function, on-CPU ms) and (tid, waker,
/// blocked ms).
fn window(
    cpu: &[(u32, &str, u64)],
    waits: &[(u32, WaitedOn, u64)],
) -> (Vec<Sample>, Vec<(usize, WaitedOn)>) {
    let mut samples: Vec<Sample> = cpu
        .iter()
        .map(|&(tid, f, ms)| row(tid, ThreadState::Running, f, ms, 0))
        .collect();
    let mut woken = Vec::new();
    for (tid, waker, ms) in waits {
        woken.push((samples.len(), waker.clone()));
        samples.push(row(*tid, ThreadState::Sleeping, "read", 0, ms * MS));
    }
    (samples, woken)
}

/// The estimates of `samples`, 1 ms a sample.
fn estimate(samples: &[Sample], woken: &[(usize, WaitedOn)], what_if: &WhatIf) -> Vec<String> {
    let waits = Waits {
        threads: woken.to_vec(),
        goroutines: Vec::new(),
    };
    estimates(samples, &thread_times(samples, &waits, MS), what_if)
}

fn c_compute(pct: u8) -> WhatIf {
    WhatIf {
        function: "c_compute".to_owned(),
        faster_pct: pct,
    }
}

#[test]
fn a_loop_of_requests_gains_what_the_function_takes_from_one_round() {
    // 20 rounds of 3 ms: a works 0.5 ms then waits for b; b works 0.5 ms
    // then waits for c's 2 ms; each waits for the others the rest.
    let (samples, woken) = window(
        &[(1, "a_work", 10), (2, "b_work", 10), (3, "c_compute", 40)],
        &[
            (1, by(2), 50),
            (2, by(1), 10),
            (2, by(3), 40),
            (3, by(2), 20),
        ],
    );
    // c_compute at half its time: a round of 2 ms instead of 3.
    assert_eq!(
        estimate(&samples, &woken, &c_compute(50)),
        [
            "what_if_faster=c_compute 50%",
            "what_if_1=t1:1 +50.0%",
            "what_if_2=t2:2 +50.0%",
            "what_if_3=t3:3 +50.0%",
        ]
    );
}

#[test]
fn a_loop_member_that_wakes_another_briefly_still_counts() {
    // The same loop, but b waits for a's request only 5 ms of its 60 (a
    // writes its request as b finishes its reply): under the threshold,
    // yet a waits on b, so a is in b's loop and in c's. Without a, b's
    // and c's rounds would leave a's work out (and read +57.1%).
    let (samples, woken) = window(
        &[(1, "a_work", 10), (2, "b_work", 10), (3, "c_compute", 40)],
        &[
            (1, by(2), 50),
            (2, by(1), 5),
            (2, by(3), 45),
            (3, by(2), 20),
        ],
    );
    assert_eq!(
        estimate(&samples, &woken, &c_compute(50))[1..],
        [
            "what_if_1=t1:1 +50.0%",
            "what_if_2=t2:2 +50.0%",
            "what_if_3=t3:3 +50.0%",
        ]
    );
}

#[test]
fn a_pipeline_goes_at_its_slowest_stage() {
    // c computes all the time and hands rounds on; b and a each work a
    // tenth of their time and wait on the stage before for the rest.
    let (samples, woken) = window(
        &[(1, "a_work", 6), (2, "b_work", 6), (3, "c_compute", 60)],
        &[(1, by(2), 54), (2, by(3), 54)],
    );
    // Half of c's time: twice the rounds, for every stage.
    let lines = estimate(&samples, &woken, &c_compute(50));
    assert_eq!(
        lines[1..],
        [
            "what_if_1=t1:1 +100.0%",
            "what_if_2=t2:2 +100.0%",
            "what_if_3=t3:3 +100.0%"
        ]
    );
    // At 90% less, c's 6 ms a round is b's and a's: b and a set the pace.
    let lines = estimate(&samples, &woken, &c_compute(90));
    assert!(
        lines.contains(&"what_if_1=t1:1 +900.0%".to_owned()),
        "{lines:?}"
    );
    // A function of the last stage speeds it alone: a's 10% busy was not
    // what held the pipeline.
    let a_work = WhatIf {
        function: "a_work".to_owned(),
        faster_pct: 50,
    };
    assert_eq!(
        estimate(&samples, &woken, &a_work)[1..],
        ["what_if_1=t1:1 +0.0%"]
    );
}

#[test]
fn a_thread_that_waits_on_timers_gains_only_its_own_share() {
    // t1 computes 20 ms in c_compute and sleeps 80 ms on a timer; a brief
    // wait on t9 (a thread sleeping all window) does not join t9 in.
    let (mut samples, mut woken) = window(
        &[(1, "c_compute", 20), (9, "idle", 1)],
        &[
            (
                1,
                WaitedOn::Interrupt(super::super::wakers::Interrupt::Timer),
                75,
            ),
            (1, by(9), 5),
        ],
    );
    let (more, more_woken) = window(&[], &[(9, WaitedOn::Unknown, 99)]);
    let at = samples.len();
    samples.extend(more);
    woken.extend(more_woken.into_iter().map(|(i, w)| (i + at, w)));
    // 100 ms a round, 10 of them taken out.
    assert_eq!(
        estimate(&samples, &woken, &c_compute(50))[1..],
        ["what_if_1=t1:1 +11.1%"]
    );
}

#[test]
fn no_thread_runs_the_function_no_estimate() {
    let (samples, woken) = window(&[(1, "a_work", 10)], &[(1, by(2), 50)]);
    assert!(estimate(&samples, &woken, &c_compute(50)).is_empty());
}

#[test]
fn a_function_is_named_as_its_language_writes_it() {
    let f = c_compute(50);
    for name in [
        "c_compute",
        "ns::c_compute",
        "main.c_compute",
        "pkg.Class.c_compute",
    ] {
        assert!(f.matches(name), "{name}");
    }
    for name in ["xc_compute", "c_compute2", "c_compute::inner", "c"] {
        assert!(!f.matches(name), "{name}");
    }
}

#[test]
fn goroutines_are_estimated_through_their_own_wakers() {
    // A pipeline of goroutines over 100 ms: 3 computes c_compute (on
    // threads 7 and 8) all along, 2 waits on 3 and forwards (10 ms), 1
    // waits on 2. Goroutine 4 sleeps (the Go runtime wakes it): no
    // estimate.
    let samples = vec![
        running(7, 3, "c_compute", 50),
        running(8, 3, "c_compute", 50),
        running(7, 2, "b_forward", 10),
        goroutine(2, "waiting", "b_wait", 90 * MS),
        goroutine(1, "waiting", "a_wait", 100 * MS),
        goroutine(4, "waiting", "d_sleep", 100 * MS),
    ];
    let waits = goroutine_waits(&[
        (1, "a_wait", 100, 2),
        (2, "b_wait", 90, 3),
        (4, "d_sleep", 100, 0),
    ]);
    // 3 sets the pace: c_compute at half its time, twice the items. (The
    // threads that ran it have estimates of their own.)
    let lines = estimates(
        &samples,
        &thread_times(&samples, &waits, MS),
        &c_compute(50),
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| !l.contains("=t"))
            .collect::<Vec<_>>(),
        [
            "what_if_faster=c_compute 50%",
            "what_if_1=goroutine 1 of 1 +100.0%",
            "what_if_2=goroutine 2 of 1 +100.0%",
            "what_if_3=goroutine 3 of 1 +100.0%",
        ]
    );
}

#[test]
fn a_thread_is_named_as_most_of_its_rows_name_it() {
    // Thread 1 named itself `a` after its first row, as `inherited`.
    let (mut samples, woken) = window(
        &[(1, "a_work", 10), (1, "a_work", 10), (2, "c_compute", 40)],
        &[(1, by(2), 40), (2, by(1), 20)],
    );
    for s in &mut samples {
        s.thread = if s.tid == 1 { "a" } else { "c" }.to_owned();
    }
    let mut first = samples[0].clone();
    first.thread = "inherited".to_owned();
    first.stack.clear();
    for order in [0, samples.len()] {
        let mut rows = samples.clone();
        rows.insert(order, first.clone());
        let woken: Vec<_> = woken
            .iter()
            .map(|(i, w)| (i + usize::from(*i >= order), w.clone()))
            .collect();
        let lines = estimate(&rows, &woken, &c_compute(50));
        assert!(lines.iter().any(|l| l.contains("=a:1 ")), "{lines:?}");
        assert!(!lines.iter().any(|l| l.contains("inherited")), "{lines:?}");
    }
}

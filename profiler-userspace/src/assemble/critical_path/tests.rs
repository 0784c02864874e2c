use profiler_common::sample::ThreadState;

use super::*;
use crate::assemble::test_rows::{by, goroutine, goroutine_waits, row, running};

/// The chains of `samples`, on-CPU rows weighing `period_ns` a sample.
fn chains_of(samples: &[Sample], woken: &[(usize, WaitedOn)], period_ns: u64) -> Chains {
    let waits = Waits {
        threads: woken.to_vec(),
        goroutines: Vec::new(),
    };
    critical_path(samples, &waits, &thread_times(samples, &waits, period_ns))
}

/// (the end's top frame, the chain's frames, ns) of each row.
fn ends(chains: &Chains) -> Vec<(String, Vec<String>, u64)> {
    let mut ends: Vec<_> = chains
        .rows
        .iter()
        .map(|r| {
            let names: Vec<String> = r
                .stack
                .iter()
                .map(|l| l.lines[0].function.clone())
                .collect();
            let hops = names[1..names.len() - 1].to_vec();
            (names[0].clone(), hops, r.critical_ns)
        })
        .collect();
    ends.sort();
    ends
}

#[test]
fn a_wait_ends_where_its_wakers_spent_their_time() {
    // t1 waits 100 ms on t2; t2 computes 10 ms (b_work) and waits 90 ms on
    // t3; t3 computes (c_compute). 1 ms a sample.
    let samples = vec![
        row(1, ThreadState::Sleeping, "a_wait", 0, 100_000_000),
        row(2, ThreadState::Running, "b_work", 10, 0),
        row(2, ThreadState::Sleeping, "b_wait", 0, 90_000_000),
        row(3, ThreadState::Running, "c_compute", 100, 0),
    ];
    let woken = [(0, by(2)), (2, by(3))];
    let chains = chains_of(&samples, &woken, 1_000_000);
    let of_t1: Vec<_> = ends(&chains)
        .into_iter()
        .filter(|(_, hops, _)| hops.last().is_some_and(|h| h == "[woken by t2:2]"))
        .collect();
    assert_eq!(
        of_t1,
        [
            (
                "b_work".to_owned(),
                vec!["[woken by t2:2]".to_owned()],
                10_000_000
            ),
            (
                "c_compute".to_owned(),
                vec!["[woken by t3:3]".to_owned(), "[woken by t2:2]".to_owned()],
                90_000_000
            ),
        ]
    );
    assert_eq!(
        top_ends(&chains.by_end)[0],
        "critical_path_top_1=t3:3 180000000"
    );
}

#[test]
fn a_cycle_ends_the_chain_and_is_counted() {
    // t1 and t2 wake each other, and t2 computes a little.
    let samples = vec![
        row(1, ThreadState::Sleeping, "a_wait", 0, 50_000_000),
        row(2, ThreadState::Sleeping, "b_wait", 0, 50_000_000),
        row(2, ThreadState::Running, "b_work", 50, 0),
    ];
    let woken = [(0, by(2)), (1, by(1))];
    let chains = chains_of(&samples, &woken, 1_000_000);
    assert!(chains.cycles > 0);
    let ends = ends(&chains);
    let of_t1: u64 = ends
        .iter()
        .filter(|(_, hops, _)| hops == &["[woken by t2:2]"])
        .map(|(_, _, ns)| ns)
        .sum();
    assert!((49_000_000..=50_000_000).contains(&of_t1), "{ends:?}");
    assert!(ends.iter().any(|(end, _, _)| end == "[cycle]"), "{ends:?}");
}

#[test]
fn interrupts_and_strangers_end_a_chain() {
    let samples = vec![
        row(1, ThreadState::Disk, "a_read", 0, 30),
        row(1, ThreadState::Sleeping, "a_wait", 0, 70),
    ];
    let woken = [
        (
            0,
            WaitedOn::Interrupt(super::super::wakers::Interrupt::Disk),
        ),
        (1, by(9)),
    ];
    let chains = chains_of(&samples, &woken, 1);
    let ends = ends(&chains);
    assert_eq!(ends[0].0, "[not profiled]");
    assert_eq!(ends[0].2, 70);
    assert_eq!(ends[1].0, "[woken by disk]");
    assert_eq!(ends[1].2, 30);
}

#[test]
fn a_goroutine_s_wait_ends_where_its_waking_goroutines_spent_their_time() {
    // Goroutine 1 waits 100 ms on goroutine 2 (twice: 60 ms that ended,
    // 40 ms read); 2 computes 10 ms (b_work, on thread 7) and waits 90 ms
    // on 3, which computes (c_compute, on threads 7 and 8) and waits
    // 20 ms for a CPU. Goroutine 4 sleeps (woken by the Go runtime).
    let samples = vec![
        goroutine(1, "waiting", "a_wait", 100 * MS),
        running(7, 2, "b_work", 10),
        goroutine(2, "waiting", "b_wait", 90 * MS),
        running(7, 3, "c_compute", 40),
        running(8, 3, "c_compute", 40),
        goroutine(3, "runnable", "c_compute", 20 * MS),
        goroutine(4, "waiting", "d_sleep", 30 * MS),
    ];
    let waits = goroutine_waits(&[
        (1, "a_wait", 60, 2),
        (1, "a_wait", 40, 2),
        (2, "b_wait", 90, 3),
        (4, "d_sleep", 30, 0),
    ]);
    let chains = critical_path(&samples, &waits, &thread_times(&samples, &waits, MS));
    let of = |hop: &str| -> Vec<(String, u64)> {
        let mut found: HashMap<String, u64> = HashMap::new();
        for (end, hops, ns) in ends(&chains) {
            if hops.last().is_some_and(|h| h == hop) {
                *found.entry(format!("{end} {}", hops.len())).or_default() += ns;
            }
        }
        let mut found: Vec<_> = found.into_iter().collect();
        found.sort();
        found
    };
    // 1's 100 ms: 10% b_work; 90% through 3: 80/100 c_compute, 20/100 for
    // a CPU.
    assert_eq!(
        of("[woken by goroutine 2]"),
        [
            ("[waiting for a CPU] 2".to_owned(), 18 * MS),
            ("b_work 1".to_owned(), 10 * MS),
            ("c_compute 2".to_owned(), 72 * MS),
        ]
    );
    assert_eq!(
        ends(&chains)
            .iter()
            .filter(|(end, _, _)| end == "[woken by the Go runtime]")
            .map(|(_, _, ns)| ns)
            .sum::<u64>(),
        30 * MS
    );
    assert_eq!(
        top_ends(&chains.by_end)[0],
        format!("critical_path_top_1=goroutine 3 of 1 {}", 72 * MS + 72 * MS)
    );
}

const MS: u64 = 1_000_000;

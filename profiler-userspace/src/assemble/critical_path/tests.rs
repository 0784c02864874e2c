use super::*;
use crate::assemble::test_rows::{by, row};

/// The chains of `samples`, on-CPU rows weighing `period_ns` a sample.
fn chains_of(samples: &[Sample], woken: &[(usize, WaitedOn)], period_ns: u64) -> Chains {
    critical_path(samples, woken, &thread_times(samples, woken, period_ns))
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

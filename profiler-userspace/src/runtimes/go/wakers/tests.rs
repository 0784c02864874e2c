use std::sync::Mutex;

use profiler_common::go_wake::GO_WAKE_FRAMES;

use super::*;

/// Wakeups set by the test, by goroutine.
#[derive(Default)]
struct Wakes(Mutex<FxHashMap<u64, GoWake>>);

impl Wakes {
    fn woke(&self, goid: u64, time_ns: u64, waker_goid: u64, frames: &[u64]) {
        let mut wake = GoWake {
            time_ns,
            waker_goid,
            tid: 1,
            frames_len: u32::try_from(frames.len()).unwrap(),
            frames: [0; GO_WAKE_FRAMES],
        };
        wake.frames[..frames.len()].copy_from_slice(frames);
        self.0.lock().unwrap().insert(goid, wake);
    }
}

impl GoWakeLookup for Wakes {
    fn last_wake(&self, pid: u32, goid: u64) -> Option<GoWake> {
        assert_eq!(pid, 7);
        self.0.lock().unwrap().get(&goid).copied()
    }
}

fn unit(goid: u64, status: GoroutineStatus, leaf: u64) -> Unit<GoroutineKey> {
    Unit {
        key: GoroutineKey {
            goid,
            status,
            wait_reason: (status == GoroutineStatus::Waiting).then(|| Arc::from("chan receive")),
            created_by: Arc::from("main.main"),
            labels: Arc::from([]),
            woken_by: None,
        },
        stack: Stack::Frames(Arc::from([leaf, 0x100])),
    }
}

fn parked(goid: u64) -> Unit<GoroutineKey> {
    unit(goid, GoroutineStatus::Waiting, 0x500)
}

/// What ended each wait, and its time.
fn summary(ended: &[(Unit<GoroutineKey>, u64)]) -> Vec<(u64, Option<u64>, u64)> {
    ended
        .iter()
        .map(|(unit, weight)| {
            let waker = match &unit.key.woken_by {
                Some(WokenBy::Goroutine(waker)) => Some(waker.goid),
                Some(WokenBy::Unknown) => None,
                Some(WokenBy::GoPoller) => Some(u64::MAX),
                other => panic!("{other:?}"),
            };
            (unit.key.goid, waker, *weight)
        })
        .collect()
}

#[test]
fn a_wait_ends_with_the_wakeup_after_the_last_read_that_saw_it() {
    let wakes = Arc::new(Wakes::default());
    let mut waits = Waits::new(7, Arc::clone(&wakes) as Arc<dyn GoWakeLookup>);
    // A wakeup from before the wait: not its waker.
    wakes.woke(1, 50, 9, &[0x900]);
    for now in [100, 200, 300] {
        assert!(waits.after_read(&[parked(1)], 10, true, now).is_empty());
    }
    wakes.woke(1, 350, 2, &[0x210, 0x220]);
    // Running at the next read: not in the list.
    let ended = waits.after_read(&[], 10, true, 400);
    assert_eq!(summary(&ended), [(1, Some(2), 30)]);
    let (unit, _) = &ended[0];
    let Some(WokenBy::Goroutine(by)) = &unit.key.woken_by else {
        unreachable!()
    };
    assert_eq!(by.stack, Stack::Frames(Arc::from([0x210, 0x220])));
    assert_eq!(unit.stack, parked(1).stack);
    assert!(waits.after_read(&[], 10, true, 500).is_empty());
}

#[test]
fn a_goroutine_parked_again_where_it_was_starts_a_new_wait() {
    let wakes = Arc::new(Wakes::default());
    let mut waits = Waits::new(7, Arc::clone(&wakes) as Arc<dyn GoWakeLookup>);
    waits.after_read(&[parked(1)], 10, true, 100);
    waits.after_read(&[parked(1)], 10, true, 200);
    wakes.woke(1, 250, 3, &[0x300]);
    let ended = waits.after_read(&[parked(1)], 10, true, 300);
    assert_eq!(summary(&ended), [(1, Some(3), 20)]);
    // The new wait began at 300: the same wakeup does not end it.
    assert!(waits.after_read(&[parked(1)], 10, true, 400).is_empty());
    wakes.woke(1, 450, 0, &[]);
    let ended = waits.after_read(&[unit(1, GoroutineStatus::Runnable, 0x500)], 10, true, 500);
    assert_eq!(summary(&ended), [(1, Some(0), 20)]);
}

#[test]
fn a_wait_left_without_a_recorded_wakeup_ends_unknown() {
    let wakes = Arc::new(Wakes::default());
    let mut waits = Waits::new(7, Arc::clone(&wakes) as Arc<dyn GoWakeLookup>);
    waits.after_read(&[parked(1), parked(2)], 10, true, 100);
    // Parked elsewhere: another wait, the first ended by nothing recorded
    // (the network poller wakes without `runtime.ready`).
    let moved = unit(1, GoroutineStatus::Waiting, 0x600);
    let ended = waits.after_read(&[moved, parked(2)], 10, true, 200);
    assert_eq!(summary(&ended), [(1, None, 10)]);
}

#[test]
fn a_goroutine_a_partial_read_skips_stays_parked_until_forgotten() {
    let wakes = Arc::new(Wakes::default());
    let mut waits = Waits::new(7, Arc::clone(&wakes) as Arc<dyn GoWakeLookup>);
    waits.after_read(&[parked(1)], 10, false, 100);
    assert!(waits.after_read(&[], 10, false, 200).is_empty());
    let later = 100 + FORGET_NS + 1;
    assert_eq!(
        summary(&waits.after_read(&[], 10, false, later)),
        [(1, None, 10)]
    );
}

#[test]
fn an_io_wait_no_wakeup_ended_was_ended_by_the_network_poller() {
    let wakes = Arc::new(Wakes::default());
    let mut waits = Waits::new(7, Arc::clone(&wakes) as Arc<dyn GoWakeLookup>);
    let reading = || {
        let mut unit = parked(1);
        unit.key.wait_reason = Some(Arc::from("IO wait"));
        unit
    };
    waits.after_read(&[reading()], 10, true, 100);
    // Still parked on its socket: named at each read.
    let ended = waits.after_read(&[reading()], 10, true, 150);
    assert_eq!(summary(&ended), [(1, Some(u64::MAX), 10)]);
    assert_eq!(
        summary(&waits.after_read(&[], 10, true, 200)),
        [(1, Some(u64::MAX), 10)]
    );
    // A deadline readies it through `runtime.ready`: recorded.
    waits.after_read(&[reading()], 10, true, 300);
    wakes.woke(1, 350, 0, &[]);
    assert_eq!(
        summary(&waits.after_read(&[], 10, true, 400)),
        [(1, Some(0), 10)]
    );
}

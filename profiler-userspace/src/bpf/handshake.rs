//! The rule by which the daemon and the kernel share an off-CPU interval
//! still open at a window's end, so that each nanosecond is counted once:
//! the daemon counts `[start, end]` in the window ending, the kernel the
//! rest when the thread comes back. The kernel's side is
//! `profiler-ebpf/src/off_cpu/mod.rs` (`keep_interval` takes the mark);
//! this is the daemon's, over any kernel that implements [`OpenIntervals`]
//! (the loaded maps in `in_flight.rs`; a model of the kernel in the tests).
//!
//! Per tracked thread: mark `IN_FLIGHT[tid] = end`, then read the thread's
//! open interval again. Unchanged: the thread is still away, and the
//! kernel will start from `end` when it comes back: count the part.
//! Changed: the thread came back meanwhile. The kernel deletes the mark
//! when it uses it, so a missing mark means it counted from `end` (count
//! the part), and a present one means it counted the whole interval
//! before the mark was there (the part is void: remove the mark).

/// The kernel's state of the tracked threads, as the handshake sees it.
pub(super) trait OpenIntervals {
    type Error;
    /// Marks thread `tid`'s interval as counted up to `end`.
    fn mark(&mut self, tid: u32, end: u64) -> Result<(), Self::Error>;
    /// Whether `tid`'s mark is still there (the kernel has not used it).
    fn marked(&mut self, tid: u32) -> bool;
    /// Removes `tid`'s mark.
    fn unmark(&mut self, tid: u32);
    /// When `tid`'s open interval began now (0: none open; `None`: the
    /// thread is gone).
    fn off_since(&mut self, tid: u32) -> Result<Option<u64>, Self::Error>;
}

/// The part of thread `tid`'s interval (open since `off_since`, counted by
/// earlier windows up to `accounted_to`) that the window ending at `end`
/// counts, after the handshake: `Some(start)` for `[start, end]`, `None`
/// when the window counts none of it.
///
/// # Errors
/// When the kernel's state cannot be read or written.
pub(super) fn part_to_count<K: OpenIntervals>(
    kernel: &mut K,
    tid: u32,
    off_since: u64,
    accounted_to: Option<u64>,
    end: u64,
) -> Result<Option<u64>, K::Error> {
    if off_since == 0 || off_since >= end {
        return Ok(None);
    }
    let start = off_since.max(accounted_to.unwrap_or(0));
    if start >= end {
        return Ok(None);
    }
    kernel.mark(tid, end)?;
    let unchanged = kernel.off_since(tid)? == Some(off_since);
    if !unchanged && kernel.marked(tid) {
        // The kernel counted the whole interval: ours is void.
        kernel.unmark(tid);
        return Ok(None);
    }
    Ok(Some(start))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// When the model's thread comes back, relative to the handshake.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum Back {
        /// After the daemon read its entry, before the mark.
        BeforeMark,
        /// After the mark, before the daemon reads its entry again.
        AfterMark,
        /// Not during this window's handshake.
        Later,
    }

    /// One thread off the CPU, and the kernel's side of the rule as
    /// `keep_interval` applies it: at switch-in it takes the mark, if any,
    /// and counts from there; without one it counts the whole interval.
    struct Model {
        off_since: u64,
        marks: HashMap<u32, u64>,
        back: Back,
        /// The time the thread comes back at.
        back_at: u64,
        /// Nanoseconds the kernel counted.
        kernel_counted: u64,
    }

    const TID: u32 = 7;

    impl Model {
        fn switch_in(&mut self) {
            if self.off_since == 0 {
                return;
            }
            let from = self
                .marks
                .remove(&TID)
                .map_or(self.off_since, |until| until.max(self.off_since));
            self.kernel_counted += self.back_at.saturating_sub(from);
            self.off_since = 0;
        }
    }

    impl OpenIntervals for Model {
        type Error = ();

        fn mark(&mut self, tid: u32, end: u64) -> Result<(), ()> {
            if self.back == Back::BeforeMark {
                self.switch_in();
            }
            self.marks.insert(tid, end);
            if self.back == Back::AfterMark {
                self.switch_in();
            }
            Ok(())
        }

        fn marked(&mut self, tid: u32) -> bool {
            self.marks.contains_key(&tid)
        }

        fn unmark(&mut self, tid: u32) {
            self.marks.remove(&tid);
        }

        fn off_since(&mut self, _tid: u32) -> Result<Option<u64>, ()> {
            Ok(Some(self.off_since))
        }
    }

    /// Off the CPU from 100 to 1000, a window ending at `end`: whenever the
    /// thread comes back, the daemon's part and the kernel's add up to the
    /// whole interval, each nanosecond once.
    #[test]
    fn each_nanosecond_is_counted_once_whenever_the_thread_comes_back() {
        for back in [Back::BeforeMark, Back::AfterMark, Back::Later] {
            for end in [150, 500, 999] {
                let mut model = Model {
                    off_since: 100,
                    marks: HashMap::new(),
                    back,
                    // A thread back during the handshake is back at about
                    // the window's end; one back later, at 1000.
                    back_at: if back == Back::Later { 1000 } else { end + 1 },
                    kernel_counted: 0,
                };
                let part = part_to_count(&mut model, TID, 100, None, end).unwrap();
                let daemon_counted = part.map_or(0, |start| end - start);
                if back == Back::Later {
                    model.switch_in();
                }
                assert_eq!(
                    daemon_counted + model.kernel_counted,
                    model.back_at - 100,
                    "{back:?}, window end {end}"
                );
                // A mark is never left behind for a thread that is back.
                assert!(model.marks.is_empty(), "{back:?}, window end {end}");
            }
        }
    }

    /// An interval open across several windows: each counts its own part,
    /// from where the last one stopped, and the kernel the rest.
    #[test]
    fn a_long_interval_is_split_at_each_window_end() {
        let mut model = Model {
            off_since: 100,
            marks: HashMap::new(),
            back: Back::Later,
            back_at: 3500,
            kernel_counted: 0,
        };
        let mut daemon_counted = 0;
        let mut accounted_to = None;
        for end in [1000, 2000, 3000] {
            let start = part_to_count(&mut model, TID, 100, accounted_to, end)
                .unwrap()
                .expect("still away: counted");
            assert_eq!(start, accounted_to.unwrap_or(100));
            daemon_counted += end - start;
            accounted_to = model.marks.get(&TID).copied();
            assert_eq!(accounted_to, Some(end));
        }
        model.switch_in();
        assert_eq!((daemon_counted, model.kernel_counted), (2900, 500));
    }

    #[test]
    fn nothing_is_counted_for_an_interval_not_open_before_the_end() {
        let mut model = Model {
            off_since: 0,
            marks: HashMap::new(),
            back: Back::Later,
            back_at: 0,
            kernel_counted: 0,
        };
        for (off_since, accounted_to) in [(0, None), (600, None), (100, Some(500))] {
            assert_eq!(
                part_to_count(&mut model, TID, off_since, accounted_to, 500),
                Ok(None)
            );
        }
        assert!(model.marks.is_empty(), "no mark without a part");
    }
}

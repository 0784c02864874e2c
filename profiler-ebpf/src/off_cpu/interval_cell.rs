//! Where a tracked thread's open interval lives (see
//! `profiler_common::task`): in the interval cell of its tid when it owns
//! that cell, which a switch reaches without a helper call, else in its
//! task storage.
//!
//! A cell is claimed by the first tracked thread that switches out with
//! the cell free, with a compare-and-swap since two threads that share a
//! cell may switch out on two CPUs at once. It is released when its owner
//! exits. Only the owner writes the cell's interval, and one thread's
//! switches are never concurrent, so those writes need no atomics.
use core::intrinsics::{AtomicOrdering, atomic_cxchg, atomic_xchg};

use profiler_common::task::IntervalCell;

use crate::maps;

/// The cell of thread `tid`, if `tid` owns it.
#[inline(always)]
pub fn owned(tid: u32) -> Option<*mut IntervalCell> {
    let cell = maps::interval_cell(tid)?;
    // SAFETY: a pointer into an array map's value, valid for this run.
    (unsafe { (*cell).owner } == u64::from(tid)).then_some(cell)
}

/// Claims the cell of thread `tid` if it is free: the cell, or `None`
/// when another thread owns it.
#[inline(always)]
pub fn claim(tid: u32) -> Option<*mut IntervalCell> {
    let cell = maps::interval_cell(tid)?;
    // SAFETY: a pointer into an array map's value, valid for this run and
    // aligned for a u64 (the cell's first field). Claims race only with
    // each other (a compare-and-swap each) and with the owner's release.
    let (was, _) = unsafe {
        atomic_cxchg::<u64, { AtomicOrdering::SeqCst }, { AtomicOrdering::SeqCst }>(
            &raw mut (*cell).owner,
            0,
            u64::from(tid),
        )
    };
    (was == 0 || was == u64::from(tid)).then_some(cell)
}

/// Frees the cell of thread `tid` (it exits), if it owns it.
#[inline(always)]
pub fn release(tid: u32) {
    if let Some(cell) = owned(tid) {
        // SAFETY: as in `owned`; the owner is the one writer of its cell,
        // and `owner` goes last, with a fully ordered exchange, so the next
        // claimer cannot see the cell free before it holds nothing of this
        // thread.
        unsafe {
            (*cell).open.off_since_ns = 0;
            (*cell).pending = 0;
            atomic_xchg::<u64, { AtomicOrdering::SeqCst }>(&raw mut (*cell).owner, 0);
        }
    }
}

/// Copies thread `tid`'s pending flag into its cell, if it owns one.
#[inline(always)]
pub fn mirror_pending(tid: u32, pending: bool) {
    if let Some(cell) = owned(tid) {
        // SAFETY: as in `owned`.
        unsafe { (*cell).pending = u32::from(pending) };
    }
}

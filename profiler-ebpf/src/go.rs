//! Go: the pprof label set of the goroutine the current thread runs (see
//! `profiler_common::go`), and with `--goroutine-wakers` its id, for the
//! thread's samples.
use aya_ebpf::helpers::bpf_probe_read_user;
use profiler_common::{
    go::{GoProcess, LabelSetSeen, MAP_HASH0, PAIR_VALUE, SLICE_LEN, form, set_identity},
    runtimes::Runtimes,
};

use crate::{maps, tls};

/// What a Go thread's sample records of the goroutine it runs.
#[derive(Clone, Copy, Default)]
pub struct GoThread {
    /// Its label set's address and identity; zeros for none.
    pub labels: u64,
    pub identity: u64,
    /// Its id, when the process's `g_goid` is published (only with
    /// `--goroutine-wakers`); 0 otherwise.
    pub goroutine: u64,
}

/// What the sample of the current thread of process `pid` records of the
/// goroutine it runs ([`GoThread`]); zeros for none (not a Go process, no
/// user goroutine on the thread, no labels, or memory out of reach). A
/// label set not seen before is asked for. `runtimes`: the maps that hold
/// `pid`; `with_goroutine`: whether to record the goroutine's id (on-CPU
/// samples).
#[inline(always)]
pub fn of_thread(pid: u32, runtimes: Runtimes, with_goroutine: bool) -> GoThread {
    if !runtimes.has(Runtimes::GO) {
        return GoThread::default();
    }
    let thread = read_thread(pid, with_goroutine).unwrap_or_default();
    if thread.labels != 0 {
        maps::note_go_label_set(&LabelSetSeen {
            pid,
            reserved: 0,
            address: thread.labels,
            identity: thread.identity,
        });
    }
    thread
}

#[inline(always)]
fn read_thread(pid: u32, with_goroutine: bool) -> Option<GoThread> {
    let process = maps::go_process(pid)?;
    let g = read_user(tls::fsbase()?.wrapping_add_signed(process.tls_g))?;
    let m = read_user(g.wrapping_add(u64::from(process.g_m)))?;
    let curg = read_user(m.wrapping_add(u64::from(process.m_curg)))?;
    if curg == 0 {
        return None;
    }
    let mut thread = GoThread::default();
    if with_goroutine && process.g_goid != 0 {
        thread.goroutine = read_user(curg.wrapping_add(u64::from(process.g_goid))).unwrap_or(0);
    }
    let set = read_user(curg.wrapping_add(u64::from(process.g_labels))).unwrap_or(0);
    if set != 0
        && let Some(identity) = identity(process, set)
    {
        (thread.labels, thread.identity) = (set, identity);
    }
    Some(thread)
}

/// The identity of the set at `set` ([`set_identity`]).
#[inline(always)]
fn identity(process: &GoProcess, set: u64) -> Option<u64> {
    let first = read_user(set)?;
    let words = if process.form == form::MAP {
        let hash0 = read_user(first.wrapping_add(MAP_HASH0))? & 0xffff_ffff;
        [first, hash0, 0, 0]
    } else {
        let len = read_user(set + SLICE_LEN)?;
        if len == 0 {
            [first, 0, 0, 0]
        } else {
            [
                first,
                len,
                read_user(first)?,
                read_user(first + PAIR_VALUE)?,
            ]
        }
    };
    Some(set_identity(words))
}

#[inline(always)]
fn read_user(at: u64) -> Option<u64> {
    // SAFETY: reads user memory through the fault-tolerant helper.
    unsafe { bpf_probe_read_user(at as *const u64).ok() }
}

//! Go: the pprof label set of the goroutine the current thread runs (see
//! `profiler_common::go`), for the thread's samples.
use aya_ebpf::helpers::bpf_probe_read_user;
use profiler_common::{
    go::{GoProcess, LabelSetSeen, MAP_HASH0, PAIR_VALUE, SLICE_LEN, form, set_identity},
    runtimes::Runtimes,
};

use crate::{maps, tls};

/// The label set of the goroutine that the current thread of process
/// `pid` runs, and the set's identity; `(0, 0)` for none (not a Go
/// process, no user goroutine on the thread, no labels, or memory out of
/// reach). A set not seen before is asked for. `runtimes`: the maps that
/// hold `pid`.
#[inline(always)]
pub fn labels(pid: u32, runtimes: Runtimes) -> (u64, u64) {
    if !runtimes.has(Runtimes::GO) {
        return (0, 0);
    }
    let Some((address, identity)) = read_labels(pid) else {
        return (0, 0);
    };
    maps::note_go_label_set(&LabelSetSeen {
        pid,
        reserved: 0,
        address,
        identity,
    });
    (address, identity)
}

#[inline(always)]
fn read_labels(pid: u32) -> Option<(u64, u64)> {
    let process = maps::go_process(pid)?;
    let g = read_user(tls::fsbase()?.wrapping_add_signed(process.tls_g))?;
    let m = read_user(g.wrapping_add(u64::from(process.g_m)))?;
    let curg = read_user(m.wrapping_add(u64::from(process.m_curg)))?;
    if curg == 0 {
        return None;
    }
    let set = read_user(curg.wrapping_add(u64::from(process.g_labels)))?;
    if set == 0 {
        return None;
    }
    Some((set, identity(process, set)?))
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

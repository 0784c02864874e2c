//! Addresses outside any file: code a JIT compiler wrote, named in the
//! process's perf map (`/tmp/perf-PID.map`, written by `node
//! --perf-basic-prof`, Python 3.12's `-X perf`, perf-map-agent), and the
//! vDSO.
//!
//! blazesym reads both (`Source::Process`), including a perf map in another
//! mount namespace (`/proc/PID/root/tmp/perf-NSPID.map`). A JIT appends to
//! its map as it compiles, so when the file has grown, blazesym's copy is
//! dropped and the addresses that did not resolve are looked up again.
use std::{collections::HashMap, path::PathBuf, sync::Arc};

use blazesym::symbolize::{
    Input,
    evict::{self, Evict},
    source::{Process, Source},
};

use super::convert::symbolize;
use crate::{process::procfs, profile::Line};

/// One process's results for addresses outside files.
#[derive(Default)]
pub(super) struct AnonymousCache {
    /// Lookup address → frames (empty: did not resolve).
    pub lines: HashMap<u64, Arc<[Line]>>,
    /// Length of the perf map when it was last read.
    perf_map_len: Option<u64>,
}

/// The perf map of `pid`, named by the process id it sees itself as.
fn perf_map_path(pid: u32) -> PathBuf {
    let ns_pid = procfs::ns_pid(pid).unwrap_or(pid);
    PathBuf::from(format!("/proc/{pid}/root/tmp/perf-{ns_pid}.map"))
}

/// Symbolizes `addrs` (not yet in `cache`) of process `pid`; returns how
/// many were looked up and how many did not resolve.
pub(super) fn symbolize_anonymous(
    blaze: &mut blazesym::symbolize::Symbolizer,
    pid: u32,
    cache: &mut AnonymousCache,
    addrs: &[u64],
) -> (u64, u64) {
    let len = std::fs::metadata(perf_map_path(pid)).ok().map(|m| m.len());
    if len != cache.perf_map_len {
        cache.perf_map_len = len;
        cache.lines.retain(|_, lines| !lines.is_empty());
        let _ = blaze.evict(&Evict::Process(evict::Process::new(pid.into())));
    }
    let todo: Vec<u64> = addrs
        .iter()
        .copied()
        .filter(|a| !cache.lines.contains_key(a))
        .collect();
    if todo.is_empty() {
        return (0, 0);
    }
    let mut process = Process::new(pid.into());
    process.perf_map = true;
    process.vdso = true;
    process.debug_syms = false;
    let resolved = symbolize(blaze, &Source::Process(process), Input::AbsAddr(&todo));
    let mut failed = 0;
    for (addr, lines) in todo.iter().zip(resolved) {
        failed += u64::from(lines.is_empty());
        cache.lines.insert(*addr, lines);
    }
    (todo.len() as u64, failed)
}

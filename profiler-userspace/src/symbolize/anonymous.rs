//! Addresses outside any file: code a JIT compiler wrote, named in the
//! process's perf map (`/tmp/perf-PID.map`, written by `node
//! --perf-basic-prof`, Python 3.12's `-X perf`, `jcmd PID
//! Compiler.perfmap`, perf-map-agent; read by `perf_map.rs`), and the
//! vDSO (blazesym's `Source::Process`).
//!
//! The map is read through the process's root, so one in another mount
//! namespace is found (`/proc/PID/root/tmp/perf-NSPID.map`). A JIT appends
//! to its map as it compiles, so when the file has grown it is read again
//! and the addresses that did not resolve are looked up again.
use std::{collections::HashMap, path::PathBuf, sync::Arc};

use blazesym::symbolize::{
    Input,
    evict::{self, Evict},
    source::{Process, Source},
};

use super::{convert::symbolize, perf_map::PerfMap};
use crate::{process::procfs, profile::Line};

/// One process's results for addresses outside files.
#[derive(Default)]
pub(super) struct AnonymousCache {
    /// Lookup address → frames (empty: did not resolve).
    pub lines: HashMap<u64, Arc<[Line]>>,
    /// Length of the perf map when it was last read.
    perf_map_len: Option<u64>,
    /// The perf map as last read.
    perf_map: PerfMap,
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
    let path = perf_map_path(pid);
    let len = std::fs::metadata(&path).ok().map(|m| m.len());
    if len != cache.perf_map_len {
        cache.perf_map_len = len;
        cache.perf_map = std::fs::read_to_string(&path)
            .map(|text| PerfMap::parse(&text))
            .unwrap_or_default();
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
    let mut vdso_todo = Vec::new();
    for &addr in &todo {
        match cache.perf_map.name(addr) {
            Some(name) => {
                let line = Line {
                    function: name.to_owned(),
                    file: String::new(),
                    line: 0,
                };
                cache.lines.insert(addr, Arc::new([line]));
            }
            None => vdso_todo.push(addr),
        }
    }
    let mut failed = 0;
    if !vdso_todo.is_empty() {
        let mut process = Process::new(pid.into());
        process.perf_map = false;
        process.vdso = true;
        process.debug_syms = false;
        let resolved = symbolize(blaze, &Source::Process(process), Input::AbsAddr(&vdso_todo));
        for (addr, lines) in vdso_todo.iter().zip(resolved) {
            failed += u64::from(lines.is_empty());
            cache.lines.insert(*addr, lines);
        }
    }
    (todo.len() as u64, failed)
}

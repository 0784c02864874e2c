//! Java frames' names: read from each JVM published (`runtimes/java/`)
//! while the window's frames are prepared, checked against what the walk
//! recorded, once per (process, frame). A compiled frame's location has a
//! line per method inlined at its PC, innermost first, as pprof draws
//! inlining.
use std::{collections::HashMap, sync::Arc};

use profiler_common::frames::UserFrame;

use crate::{
    profile::{Line, Location},
    runtimes::java::{JavaFrame, JavaVm, Namer},
};

/// The name of a Java frame whose method could not be read (its
/// compilation freed and its memory reused, or the process gone).
pub const UNKNOWN_METHOD: &str = "[unknown Java method]";

/// A Java frame of a process as the walk recorded it: the `nmethod` or
/// `Method*`, its check, and the PC offset or bytecode index.
type FrameKey = (u32, u64, u32, u32);

#[derive(Default)]
pub(super) struct JavaNames {
    namers: HashMap<u32, Namer>,
    lines: HashMap<FrameKey, Arc<[Line]>>,
}

impl JavaNames {
    /// Names the frames of the JVMs published (a JVM that exec'd, or a
    /// pid reused, starts afresh).
    pub fn remember(&mut self, vms: &[Arc<JavaVm>]) {
        for vm in vms {
            self.namers.insert(vm.pid, Namer::new(vm.pid, vm.names));
            self.lines.retain(|(pid, ..), _| *pid != vm.pid);
        }
    }

    /// Reads the names of a Java frame of `pid` (once).
    pub fn prepare(&mut self, pid: u32, frame: UserFrame) {
        let Some(key) = key(pid, frame) else {
            return;
        };
        if self.lines.contains_key(&key) {
            return;
        }
        let Some(namer) = self.namers.get_mut(&pid) else {
            return;
        };
        let frames = match frame {
            UserFrame::JavaCompiled {
                nmethod,
                compile_id,
                pc_offset,
            } => namer.compiled(nmethod, compile_id, pc_offset),
            UserFrame::JavaInterpreted {
                method,
                const_method,
                bci,
            } => namer
                .interpreted(method, const_method, bci)
                .map(|f| vec![f]),
            _ => None,
        };
        if let Some(frames) = frames {
            self.lines.insert(key, frames.iter().map(line).collect());
        }
    }

    /// The location of a Java frame whose names were prepared; an unknown
    /// method otherwise.
    pub fn location(&self, pid: u32, frame: UserFrame) -> Location {
        match key(pid, frame).and_then(|k| self.lines.get(&k)) {
            Some(lines) => Location {
                mapping: None,
                address: 0,
                lines: lines.clone(),
            },
            None => Location::marker(UNKNOWN_METHOD.to_owned()),
        }
    }

    /// Forgets the processes evicted.
    pub fn evict(&mut self, pids: &[u32]) {
        if pids.is_empty() {
            return;
        }
        self.namers.retain(|pid, _| !pids.contains(pid));
        self.lines.retain(|(pid, ..), _| !pids.contains(pid));
    }
}

fn key(pid: u32, frame: UserFrame) -> Option<FrameKey> {
    match frame {
        UserFrame::JavaCompiled {
            nmethod,
            compile_id,
            pc_offset,
        } => Some((pid, nmethod, compile_id, pc_offset)),
        UserFrame::JavaInterpreted {
            method,
            const_method,
            bci,
        } => Some((pid, method, const_method, bci)),
        _ => None,
    }
}

fn line(frame: &JavaFrame) -> Line {
    Line {
        function: frame.method.function(),
        file: frame.method.source.clone().unwrap_or_default(),
        line: frame.line,
    }
}

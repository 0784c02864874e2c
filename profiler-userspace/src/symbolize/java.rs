//! Java frames' names: read while their JVMs ran (`runtimes/java/`,
//! with each chunk), kept per (process, frame) until the process is
//! evicted. A compiled frame's location has a line per method inlined at
//! its PC, innermost first, as pprof draws inlining.
use std::{collections::HashMap, sync::Arc};

use profiler_common::frames::UserFrame;

use crate::{
    profile::{Line, Location},
    runtimes::java::{JavaFrame, NamedFrame},
};

/// The name of a Java frame whose method could not be read (its
/// compilation freed and its memory reused, or the process gone, before
/// it was read; counted in `java_frames_unnamed`).
pub const UNKNOWN_METHOD: &str = "[unknown Java method]";

/// A named frame's lines, and whether they are approximate
/// (`NamedFrame::approximate`).
type Named = (Arc<[Line]>, bool);

#[derive(Default)]
pub(super) struct JavaNames {
    lines: HashMap<(u32, UserFrame), Named>,
}

impl JavaNames {
    /// Keeps the frames named.
    pub fn remember(&mut self, names: &[Arc<NamedFrame>]) {
        for named in names {
            let key = (named.pid, named.frame);
            match &named.frames {
                Some(frames) => {
                    let lines = frames.iter().map(line).collect();
                    self.lines.insert(key, (lines, named.approximate));
                }
                None => {
                    self.lines.remove(&key);
                }
            }
        }
    }

    /// The location of a Java frame of `pid`; an unknown method when it
    /// was not named.
    pub fn location(&self, pid: u32, frame: UserFrame) -> Location {
        match self.lines.get(&(pid, frame)) {
            Some((lines, _)) => Location {
                mapping: None,
                address: 0,
                lines: lines.clone(),
            },
            None => Location::marker(UNKNOWN_METHOD.to_owned()),
        }
    }

    /// Whether any of `frames` of `pid` (a stack's) is a compiled Java
    /// frame named approximately; `None` when none is a named compiled
    /// frame.
    pub fn approximate(&self, pid: u32, frames: impl Iterator<Item = UserFrame>) -> Option<bool> {
        frames
            .filter(|f| matches!(f, UserFrame::JavaCompiled { .. }))
            .filter_map(|f| {
                self.lines
                    .get(&(pid, f))
                    .map(|(_, approximate)| *approximate)
            })
            .reduce(|a, b| a || b)
    }

    /// Forgets the processes evicted.
    pub fn evict(&mut self, pids: &[u32]) {
        if !pids.is_empty() {
            self.lines.retain(|(pid, _), _| !pids.contains(pid));
        }
    }
}

fn line(frame: &JavaFrame) -> Line {
    Line {
        function: frame.method.function(),
        file: frame.method.source.clone().unwrap_or_default(),
        line: frame.line,
    }
}

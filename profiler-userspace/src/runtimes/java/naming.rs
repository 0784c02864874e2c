//! Java frames named while their JVM runs: a frame the walk records for
//! the first time is named at once (the walk asks, and rings), and each
//! chunk's stacks are looked through for Java frames not named yet in the
//! window; each is named from its JVM's memory (`methods.rs`), so a JVM
//! that exits before its window ends keeps its names.
use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use profiler_common::{
    frames::{UserFrame, user_frames},
    java::FrameSeen,
};

use super::{
    layout::NameLayout,
    methods::{CompiledFrames, JavaFrame, Namer},
};
use crate::sample::{RawSample, Stack};

/// A Java frame as the walk recorded it in process `pid`, and its names:
/// the methods inlined there, innermost first; `None` when its
/// compilation or method was gone (freed, or another in its place) or
/// unreadable by the time it was read. `approximate` as
/// [`CompiledFrames::approximate`] (never for an interpreted frame).
#[derive(Debug)]
pub struct NamedFrame {
    pub pid: u32,
    pub frame: UserFrame,
    pub frames: Option<Vec<JavaFrame>>,
    pub approximate: bool,
}

/// The JVMs' namers, and the frames named in the window so far.
#[derive(Default)]
pub struct Naming {
    namers: HashMap<u32, Namer>,
    named: HashSet<(u32, UserFrame)>,
    /// Frames named, and left unnamed, since start.
    pub frames_named: u64,
    pub frames_unnamed: u64,
    /// Frames the walk asked to name of a JVM no longer followed (it
    /// exited or exec'd before the request was served): left unnamed.
    pub frames_jvm_gone: u64,
}

impl Naming {
    /// Names the frames of JVM `pid`, laid out as `layout`, which records
    /// debug points between safepoints or not: called once per process
    /// image published (a JVM that exec'd, or a pid reused, starts
    /// afresh).
    pub fn add(&mut self, pid: u32, layout: NameLayout, debug_non_safepoints: bool) {
        self.namers
            .insert(pid, Namer::new(pid, layout, debug_non_safepoints));
        self.named.retain(|(p, _)| *p != pid);
    }

    pub fn forget(&mut self, pid: u32) {
        self.namers.remove(&pid);
        self.named.retain(|(p, _)| *p != pid);
    }

    /// A new window: its frames are named for it again (from the namers'
    /// caches, which keep what the last ten windows asked for: the
    /// symbolizer forgets a process it has not seen for a while).
    pub fn new_window(&mut self) {
        self.named.clear();
        for namer in self.namers.values_mut() {
            namer.end_window();
        }
    }

    /// Names the frames the walk recorded for the first time (`seen`), at
    /// once, into `out`.
    pub fn name_seen(&mut self, seen: &[FrameSeen], out: &mut Vec<Arc<NamedFrame>>) {
        for s in seen {
            if let Some(frame) = user_frames(&[s.entry, s.detail]).next() {
                self.name_frame(s.pid, frame, out);
            }
        }
    }

    /// The Java frames of `samples` not named yet in this window, named.
    pub fn name(&mut self, samples: &[RawSample]) -> Vec<Arc<NamedFrame>> {
        let mut out = Vec::new();
        for sample in samples {
            let (Stack::Frames(ips) | Stack::Truncated(ips)) = &sample.user_stack else {
                continue;
            };
            if !self.namers.contains_key(&sample.pid) {
                continue;
            }
            for frame in user_frames(ips) {
                self.name_frame(sample.pid, frame, &mut out);
            }
        }
        out
    }

    /// Names Java frame `frame` of `pid` into `out`, unless named in this
    /// window already.
    fn name_frame(&mut self, pid: u32, frame: UserFrame, out: &mut Vec<Arc<NamedFrame>>) {
        if !matches!(
            frame,
            UserFrame::JavaCompiled { .. } | UserFrame::JavaInterpreted { .. }
        ) {
            return;
        }
        let Some(namer) = self.namers.get_mut(&pid) else {
            self.frames_jvm_gone += 1;
            return;
        };
        if !self.named.insert((pid, frame)) {
            return;
        }
        let result = name_one(namer, frame);
        if result.is_some() {
            self.frames_named += 1;
        } else {
            self.frames_unnamed += 1;
        }
        out.push(Arc::new(NamedFrame {
            pid,
            frame,
            approximate: result.as_ref().is_some_and(|n| n.approximate),
            frames: result.map(|n| n.frames),
        }));
    }
}

fn name_one(namer: &mut Namer, frame: UserFrame) -> Option<CompiledFrames> {
    match frame {
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
            .map(|f| CompiledFrames {
                frames: vec![f],
                approximate: false,
            }),
        _ => None,
    }
}

#[cfg(test)]
mod gone_tests {
    use profiler_common::frames::JAVA_FRAME;

    use super::*;

    /// A request of a JVM not (or no longer) followed is counted, not
    /// named; a native frame is neither.
    #[test]
    fn a_request_of_a_jvm_gone_is_counted() {
        let mut naming = Naming::default();
        let java = FrameSeen {
            pid: 42,
            pad: 0,
            entry: JAVA_FRAME | 0x1000,
            detail: 7,
        };
        let native = FrameSeen {
            entry: 0x1000,
            ..java
        };
        let mut out = Vec::new();
        naming.name_seen(&[java, native], &mut out);
        assert!(out.is_empty());
        assert_eq!(naming.frames_jvm_gone, 1);
        assert_eq!((naming.frames_named, naming.frames_unnamed), (0, 0));
    }
}

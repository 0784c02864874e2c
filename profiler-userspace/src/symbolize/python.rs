//! Python frames' names: the code objects the daemon read while their
//! processes ran (`runtimes/python/`), kept per process, and the lines
//! of the frames each window brings, made once in `prepare`.
use std::{collections::HashMap, sync::Arc};

use crate::{
    profile::{Line, Location},
    runtimes::python::{CodeInfo, PythonCode},
};

/// The name of a Python frame whose code object was not read (gone, or
/// replaced, before the daemon could read it; counted in the Python
/// runtime's comments).
pub const UNKNOWN_CODE: &str = "[unknown Python code]";

/// A code object of a process as the walk recorded it: pid, address and
/// first line.
type CodeKey = (u32, u64, u32);

#[derive(Default)]
pub(super) struct PythonNames {
    codes: HashMap<CodeKey, Arc<CodeInfo>>,
    /// The lines of each (code object, instruction) met, made once.
    lines: HashMap<(CodeKey, u32), Arc<[Line]>>,
}

impl PythonNames {
    /// Keeps the code objects read.
    pub fn remember(&mut self, codes: &[Arc<PythonCode>]) {
        for code in codes {
            let key = (code.pid, code.code, code.first_line);
            self.codes.insert(key, code.info.clone());
            self.lines.retain(|(k, _), _| *k != key);
        }
    }

    /// Makes the lines of a frame of `pid` (once).
    pub fn prepare(&mut self, pid: u32, code: u64, instr: u32, first_line: u32) {
        let key = (pid, code, first_line);
        if self.lines.contains_key(&(key, instr)) {
            return;
        }
        let Some(info) = self.codes.get(&key) else {
            return;
        };
        let line = Line {
            function: info.name.clone(),
            file: info.file.clone(),
            line: info.line(instr),
        };
        self.lines.insert((key, instr), Arc::new([line]));
    }

    /// The location of a frame whose lines were prepared; unknown code
    /// otherwise.
    pub fn location(&self, pid: u32, code: u64, instr: u32, first_line: u32) -> Location {
        match self.lines.get(&((pid, code, first_line), instr)) {
            Some(lines) => Location {
                mapping: None,
                address: 0,
                lines: lines.clone(),
            },
            None => Location::marker(UNKNOWN_CODE.to_owned()),
        }
    }

    /// Forgets the processes evicted.
    pub fn evict(&mut self, pids: &[u32]) {
        if pids.is_empty() {
            return;
        }
        self.codes.retain(|(pid, _, _), _| !pids.contains(pid));
        self.lines.retain(|((pid, _, _), _), _| !pids.contains(pid));
    }
}

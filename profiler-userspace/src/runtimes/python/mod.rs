//! CPython, read from outside: the kernel walk records Python frames in
//! place of the eval loop's native frames (`profiler-ebpf`'s `python.rs`,
//! types in `profiler_common::python`), and this module gives it what it
//! needs and names what it records.
//!
//! - `binary.rs` recognises an interpreter binary (once per file) and its
//!   version; `layout.rs` and `debug_offsets.rs` say where its structures
//!   keep what is read.
//! - [`Python::publish`] tells the walk, per process, where the eval loop,
//!   the thread states and the frames are, when the unwinder reads the
//!   process's mappings (first sample, exec), so every kind of target gets
//!   Python frames the way it gets tables.
//! - [`Python::serve`] reads the code objects the walk recorded for the
//!   first time, at once (the process most likely still runs): names,
//!   file, line table (`code.rs`, `lines.rs`). The symbolizer gets them
//!   with the chunk and names frames from them.
//!
//! An interpreter this build cannot read (unknown version, free-threaded
//! build) is named once in the log; its processes keep native frames.
mod binary;
mod code;
mod debug_offsets;
pub mod dwarf;
mod frozen;
pub mod layout;
mod lines;

use std::{collections::HashMap, sync::Arc};

use profiler_common::python::{CodeSeen, PythonProcess};

pub use binary::{Interpreter, Recognised, recognise};
pub use code::{CodeError, CodeInfo, PythonCode};
pub use layout::{LineTable, Version};

use self::frozen::Frozen;
use super::file_memo::FileMemo;
use crate::{
    bpf::{KernelError, PythonMaps},
    process::memory::Memory,
    process::{
        files::open_mapped,
        maps::{FileStamp, Vma},
    },
};

/// What reading Python code objects counted (a profile's comments).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PythonStats {
    /// Processes published as Python processes.
    pub processes: u64,
    /// Code objects read.
    pub codes_read: u64,
    /// Code objects of an interpreter's own image named as read in
    /// another process of it (`frozen.rs`).
    pub codes_shared: u64,
    /// Code objects gone, or another in their place, by the time they were
    /// read: their frames are unnamed (`[unknown Python code]`).
    pub codes_reused: u64,
    /// Code objects that could not be read (the process gone, its memory
    /// out of reach).
    pub codes_unreadable: u64,
}

impl PythonStats {
    /// The counters as profile comments.
    #[must_use]
    pub fn comments(&self) -> Vec<String> {
        [
            ("python_processes", self.processes),
            ("python_code_objects_read", self.codes_read),
            ("python_code_objects_shared", self.codes_shared),
            ("python_code_objects_reused", self.codes_reused),
            ("python_code_objects_unreadable", self.codes_unreadable),
        ]
        .iter()
        .map(|(name, value)| format!("{name}: {value}"))
        .collect()
    }
}

/// A Python process as published.
struct Process {
    interpreter: Arc<Interpreter>,
    /// The interpreter's file.
    file: FileStamp,
    bias: u64,
}

/// The daemon's side of the Python walk.
#[derive(Default)]
pub struct Python {
    /// Interpreters by file, recognised once (`None`: not one, or one not
    /// read).
    binaries: FileMemo<Option<Arc<Interpreter>>>,
    processes: HashMap<u32, Process>,
    /// Code objects of the interpreters' own images, read once.
    frozen: Frozen,
    /// Code objects read since the last [`Python::take_codes`].
    codes: Vec<Arc<PythonCode>>,
    stats: PythonStats,
}

impl Python {
    /// Publishes `pid` as a Python process if one of its executable
    /// `mappings` (as the unwinder read them, each with its file's stamp)
    /// is an interpreter, and forgets it otherwise (it exec'd into
    /// something else).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn publish(
        &mut self,
        maps: &mut impl PythonMaps,
        pid: u32,
        mappings: &[(&Vma, Option<FileStamp>)],
    ) -> Result<bool, KernelError> {
        let found = mappings
            .iter()
            .filter_map(|&(vma, stamp)| {
                let stamp = stamp?;
                Some((vma, stamp, self.interpreter(pid, vma, stamp)?))
            })
            .find_map(|(vma, file, interpreter)| {
                let bias = interpreter.bias(vma.offset, vma.start)?;
                Some((interpreter, file, bias))
            });
        let Some((interpreter, file, bias)) = found else {
            if self.processes.remove(&pid).is_some() {
                maps.remove_python(pid)?;
            }
            return Ok(false);
        };
        let (eval_start, eval_end) = interpreter.eval;
        let process = PythonProcess {
            eval_start: eval_start.wrapping_add(bias),
            eval_end: eval_end.wrapping_add(bias),
            interpreters_head: interpreter
                .runtime
                .wrapping_add(bias)
                .wrapping_add(interpreter.layout.interpreters_head),
            runtime_gil: interpreter.layout.runtime_gil.map_or(0, |gil| {
                interpreter.runtime.wrapping_add(bias).wrapping_add(gil)
            }),
            layout: interpreter.layout.kernel,
        };
        maps.set_python(pid, &process)?;
        self.stats.processes += 1;
        self.processes.insert(
            pid,
            Process {
                interpreter,
                file,
                bias,
            },
        );
        Ok(true)
    }

    /// Forgets `pid`, which exited.
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn forget(&mut self, maps: &mut impl PythonMaps, pid: u32) -> Result<(), KernelError> {
        if self.processes.remove(&pid).is_some() {
            maps.remove_python(pid)?;
        }
        Ok(())
    }

    /// Reads the code objects the walk asked for.
    ///
    /// # Errors
    /// When the kernel map cannot be read.
    pub fn serve(&mut self, maps: &mut impl PythonMaps) -> Result<(), KernelError> {
        for seen in maps.take_code_requests()? {
            self.read_code(seen);
        }
        Ok(())
    }

    /// The code objects read since the last call, for the next chunk.
    pub fn take_codes(&mut self) -> Vec<Arc<PythonCode>> {
        std::mem::take(&mut self.codes)
    }

    #[must_use]
    pub fn stats(&self) -> PythonStats {
        self.stats
    }

    fn read_code(&mut self, seen: CodeSeen) {
        let Some(process) = self.processes.get(&seen.pid) else {
            self.stats.codes_unreadable += 1;
            return;
        };
        // In the interpreter's own image: read once per file.
        let address = seen.code.wrapping_sub(process.bias);
        let frozen = process.interpreter.holds(address).then_some(process.file);
        if let Some(info) = frozen.and_then(|f| self.frozen.get(f, address, seen.first_line)) {
            self.stats.codes_shared += 1;
            self.codes.push(Arc::new(PythonCode {
                pid: seen.pid,
                code: seen.code,
                first_line: seen.first_line,
                info,
            }));
            return;
        }
        let memory = Memory { pid: seen.pid };
        match code::read(
            memory,
            &process.interpreter,
            process.bias,
            seen.code,
            seen.first_line,
        ) {
            Ok(info) => {
                self.stats.codes_read += 1;
                let info = Arc::new(info);
                if let Some(file) = frozen {
                    self.frozen
                        .insert(file, address, seen.first_line, Arc::clone(&info));
                }
                self.codes.push(Arc::new(PythonCode {
                    pid: seen.pid,
                    code: seen.code,
                    first_line: seen.first_line,
                    info,
                }));
            }
            Err(CodeError::NotCode | CodeError::Reused) => self.stats.codes_reused += 1,
            Err(e) => {
                tracing::debug!(
                    pid = seen.pid,
                    "a Python code object: {}",
                    crate::error_chain(&e)
                );
                self.stats.codes_unreadable += 1;
            }
        }
    }

    /// Files remembered (whether interpreters or not).
    #[must_use]
    pub fn binaries_cached(&self) -> usize {
        self.binaries.len()
    }

    /// The interpreter in the file `vma` of `pid` maps, recognised once
    /// per file.
    /// Whether the file `stamp` was read and is no interpreter.
    #[must_use]
    pub fn known_not(&self, stamp: &FileStamp) -> bool {
        self.binaries.known_not(stamp)
    }

    fn interpreter(&mut self, pid: u32, vma: &Vma, stamp: FileStamp) -> Option<Arc<Interpreter>> {
        self.binaries
            .get_or_read(stamp, || read_interpreter(pid, vma).ok())
            .flatten()
    }
}

/// Recognises the file behind `vma` (through the process's view of it),
/// saying once why an interpreter's frames will not be read.
/// An error when the file could not be read (the process exited or
/// exec'd meanwhile): then it is looked at again with the next process.
fn read_interpreter(pid: u32, vma: &Vma) -> std::io::Result<Option<Arc<Interpreter>>> {
    let file = open_mapped(pid, vma)?;
    // SAFETY: the file is only read, here; a binary is replaced by rename
    // on upgrade, which leaves this mapping intact.
    let data = unsafe { memmap2::Mmap::map(&file) }?;
    Ok(match recognise(&data, &vma.path) {
        Recognised::NotPython => None,
        Recognised::Python(interpreter) => {
            tracing::debug!(path = &*vma.path, version = %interpreter.version, "a CPython interpreter");
            Some(Arc::new(interpreter))
        }
        Recognised::Unsupported { why } => {
            tracing::info!(
                "the CPython interpreter {}: {why}; its processes show native frames",
                vma.path
            );
            None
        }
    })
}

#[cfg(test)]
mod tests;

//! OpenTelemetry's thread context (OTEP 4947, see
//! `profiler_common::thread_ctx`): a process whose executable or one of
//! whose libraries defines and exports the thread-local
//! `otel_thread_ctx_v1` is published to the samples with where the
//! variable is (`variable.rs`), when the unwinder reads its mappings; each
//! sample then records the trace and span its thread runs in. A library
//! whose slot the dynamic linker has not filled yet (the process still
//! starting) is tried again at each poll.
mod variable;

use std::{collections::HashMap, sync::Arc};

use profiler_common::thread_ctx::ThreadCtxProcess;

use super::file_memo::FileMemo;
use crate::{
    bpf::{KernelError, ThreadCtxMaps},
    process::{
        maps::{FileStamp, Vma},
        memory::Memory,
    },
    unwind::Stamped,
};

use variable::{SYMBOL, Variable};

/// Polls a library's variable is tried at before it is given up.
const PENDING_TRIES: u32 = 600;

/// The daemon's side of the thread contexts.
#[derive(Default)]
pub struct ThreadContexts {
    /// Binaries by file: where they keep the variable (`None`: they do
    /// not define it).
    binaries: FileMemo<Option<Arc<Forms>>>,
    /// Processes published.
    processes: HashMap<u32, ThreadCtxProcess>,
    /// Processes whose variable's slot was not filled yet.
    pending: HashMap<u32, Pending>,
}

/// Where a binary that defines the variable keeps it, as a program and
/// as a library (which it is depends on the process that maps it).
struct Forms {
    executable: Option<Variable>,
    library: Option<Variable>,
}

impl Forms {
    fn of(data: &[u8]) -> Option<Self> {
        let forms = Self {
            executable: Variable::of(data, true),
            library: Variable::of(data, false),
        };
        (forms.executable.is_some() || forms.library.is_some()).then_some(forms)
    }

    fn get(&self, executable: bool) -> Option<&Variable> {
        if executable {
            self.executable.as_ref()
        } else {
            self.library.as_ref()
        }
    }
}

/// A process's variable found in a mapped binary, not placed yet.
struct Pending {
    variable: Variable,
    offset: u64,
    start: u64,
    tries: u32,
}

impl ThreadContexts {
    /// Publishes `pid` if its executable or a library (among `mappings`)
    /// has the variable, and forgets it otherwise.
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn publish(
        &mut self,
        maps: &mut impl ThreadCtxMaps,
        pid: u32,
        mappings: &Stamped<'_>,
    ) -> Result<bool, KernelError> {
        // Which file is the program, read only for a process that maps one
        // defining the variable (most map none).
        let mut exe = None;
        let found = mappings.iter().find_map(|&(vma, stamp)| {
            let stamp = stamp?;
            let forms = self.forms(pid, vma, stamp)?;
            let executable = exe
                .get_or_insert_with(|| std::fs::read_link(format!("/proc/{pid}/exe")).ok())
                .as_deref()
                .is_some_and(|exe| std::path::Path::new(&*vma.path) == exe);
            Some(Pending {
                variable: forms.get(executable)?.clone(),
                offset: vma.offset,
                start: vma.start,
                tries: 0,
            })
        });
        match found {
            Some(pending) => {
                self.pending.insert(pid, pending);
                self.try_pending(maps, pid).map(|()| true)
            }
            None => self.forget(maps, pid).map(|()| false),
        }
    }

    /// Tries the processes whose slot was not filled yet again (every
    /// poll).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn serve(&mut self, maps: &mut impl ThreadCtxMaps) -> Result<(), KernelError> {
        let pids: Vec<u32> = self.pending.keys().copied().collect();
        for pid in pids {
            self.try_pending(maps, pid)?;
        }
        Ok(())
    }

    /// Forgets `pid` (exited, or exec'd into another program).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn forget(&mut self, maps: &mut impl ThreadCtxMaps, pid: u32) -> Result<(), KernelError> {
        self.pending.remove(&pid);
        if self.processes.remove(&pid).is_some() {
            maps.remove_thread_ctx(pid)?;
        }
        Ok(())
    }

    /// Places pending `pid`'s variable and publishes it; gives it up
    /// after [`PENDING_TRIES`].
    fn try_pending(&mut self, maps: &mut impl ThreadCtxMaps, pid: u32) -> Result<(), KernelError> {
        let Some(pending) = self.pending.get_mut(&pid) else {
            return Ok(());
        };
        pending.tries += 1;
        let placed = pending
            .variable
            .place(Memory { pid }, pending.offset, pending.start);
        let Some(place) = placed else {
            if pending.tries >= PENDING_TRIES {
                tracing::debug!(pid, "{SYMBOL} never placed: its slot stayed empty");
                self.pending.remove(&pid);
            }
            return Ok(());
        };
        self.pending.remove(&pid);
        if self.processes.get(&pid) != Some(&place) {
            maps.set_thread_ctx(pid, place)?;
            self.processes.insert(pid, place);
        }
        Ok(())
    }

    /// Files remembered (whether they define the variable).
    #[must_use]
    pub fn binaries_cached(&self) -> usize {
        self.binaries.len()
    }

    /// Where the binary `vma` maps keeps the variable, read once per file.
    /// Whether the file `stamp` was read and defines no thread context.
    #[must_use]
    pub fn known_not(&self, stamp: &FileStamp) -> bool {
        self.binaries.known_not(stamp)
    }

    fn forms(&mut self, pid: u32, vma: &Vma, stamp: FileStamp) -> Option<Arc<Forms>> {
        self.binaries
            .get_or_map(pid, vma, stamp, |data| Forms::of(data).map(Arc::new))
            .flatten()
    }
}

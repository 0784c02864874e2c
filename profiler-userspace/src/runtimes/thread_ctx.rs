//! OpenTelemetry's thread context (OTEP 4947, see
//! `profiler_common::thread_ctx`): a process whose executable exports the
//! thread-local `otel_thread_ctx_v1` in its dynamic symbol table is
//! published to the samples with the variable's offset from the thread
//! pointer, when the unwinder reads its mappings; each sample then records
//! the trace and span its thread runs in. The variable in a shared
//! library (whose place in the thread's TLS the dynamic linker decides)
//! is not read.
use std::collections::{HashMap, HashSet};

use profiler_common::thread_ctx::ThreadCtxProcess;

use crate::{
    bpf::{KernelError, ThreadCtxMaps},
    process::{
        files::open_mapped,
        maps::{FileStamp, Vma},
    },
    unwind::Stamped,
};

/// The TLS variable the specification names.
const SYMBOL: &str = "otel_thread_ctx_v1";

/// The daemon's side of the thread contexts.
#[derive(Default)]
pub struct ThreadContexts {
    /// Executables by file: the variable's offset from the thread
    /// pointer, or `None` for none.
    binaries: HashMap<FileStamp, Option<i64>>,
    processes: HashSet<u32>,
}

impl ThreadContexts {
    /// Publishes `pid` if its executable (among `mappings`) has the
    /// variable, and forgets it otherwise.
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn publish(
        &mut self,
        maps: &mut impl ThreadCtxMaps,
        pid: u32,
        mappings: &Stamped<'_>,
    ) -> Result<(), KernelError> {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        let found = exe.and_then(|exe| {
            mappings
                .iter()
                .filter(|(vma, _)| std::path::Path::new(&vma.path) == exe)
                .find_map(|&(vma, stamp)| self.offset(pid, vma, stamp?))
        });
        match found {
            Some(tls_offset) => {
                maps.set_thread_ctx(pid, ThreadCtxProcess { tls_offset })?;
                self.processes.insert(pid);
                Ok(())
            }
            None => self.forget(maps, pid),
        }
    }

    /// Forgets `pid` (exited, or exec'd into another program).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn forget(&mut self, maps: &mut impl ThreadCtxMaps, pid: u32) -> Result<(), KernelError> {
        if self.processes.remove(&pid) {
            maps.remove_thread_ctx(pid)?;
        }
        Ok(())
    }

    /// The variable's offset in the executable `vma` maps, read once per
    /// file.
    fn offset(&mut self, pid: u32, vma: &Vma, stamp: FileStamp) -> Option<i64> {
        if let Some(known) = self.binaries.get(&stamp) {
            return *known;
        }
        // A file that cannot be opened now (the process gone) is tried
        // again with the next process that maps it.
        let file = open_mapped(pid, vma).ok()?;
        // SAFETY: read-only; a binary is replaced by rename on upgrade,
        // which leaves this mapping intact.
        let data = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        let offset = variable_offset(&data);
        self.binaries.insert(stamp, offset);
        offset
    }
}

/// The offset from the thread pointer of `otel_thread_ctx_v1` in the
/// executable `data`, when its dynamic symbols have it as a TLS variable.
fn variable_offset(data: &[u8]) -> Option<i64> {
    use object::{Object as _, ObjectSymbol as _};
    let file = object::File::parse(data).ok()?;
    let symbol = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok(SYMBOL) && s.kind() == object::SymbolKind::Tls)?;
    super::tls::static_tls_offset(&file, symbol.address())
}

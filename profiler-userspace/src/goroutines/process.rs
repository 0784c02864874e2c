//! One Go process's goroutines, read from outside: the runtime's list
//! (`runtime.allgs`), each goroutine's status and wait reason, and the
//! stack of each one that is not running, unwound from where it stopped
//! (`g.sched`) with the binary's `.gopclntab` SP deltas.
use std::{collections::HashMap, sync::Arc};

use super::{
    layout::Layout,
    memory::{Memory, u64_at},
    runtime::GoRuntime,
};
use crate::gopclntab::GoTable;

/// The most goroutines a list may claim before it is taken as torn.
const MAX_GOROUTINES: u64 = 1 << 22;
/// Stack bytes read per goroutine, from its saved SP up.
const MAX_STACK_READ: u64 = 64 * 1024;
/// Frames kept per stack.
const MAX_FRAMES: usize = 128;
/// Reads of a goroutine that moved while read, before it is left out.
const RETRIES: usize = 3;

/// What a goroutine that is not running is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// Ready to run, waiting for a thread (`_Grunnable`, `_Gpreempted`).
    Runnable,
    /// In a system call (`_Gsyscall`).
    Syscall,
    /// Parked (`_Gwaiting`): the wait reason says on what.
    Waiting,
}

impl Status {
    /// From `g.atomicstatus`, without its `_Gscan` bit; `None` for a
    /// goroutine that is running (its time is in the on-CPU samples),
    /// dead, or being created or moved.
    #[must_use]
    pub fn of(raw: u32) -> Option<Self> {
        match raw & !0x1000 {
            1 | 9 => Some(Self::Runnable),
            3 => Some(Self::Syscall),
            4 => Some(Self::Waiting),
            _ => None,
        }
    }

    /// The `state` label of its rows.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Runnable => "runnable",
            Self::Syscall => "syscall",
            Self::Waiting => "waiting",
        }
    }
}

/// One goroutine seen in one read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub goid: u64,
    pub status: Status,
    /// Index into the runtime's wait reasons (0 when not waiting).
    pub wait_reason: u8,
    /// Runtime PCs, leaf first: where it stopped, then return addresses.
    pub stack: Vec<u64>,
}

/// What one read of a process found.
#[derive(Debug, Default)]
pub struct Read {
    pub goroutines: Vec<Observed>,
    /// Goroutines left out because they kept moving while read.
    pub torn: u64,
}

/// Why a read of a process's goroutines was dropped.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("reading the goroutine list")]
    List(#[source] std::io::Error),
    #[error("the goroutine list is torn or not where expected ({0} entries)")]
    Torn(u64),
    #[error("reading the goroutines")]
    Goroutines(#[source] std::io::Error),
}

/// A Go process being read.
pub struct GoProcess {
    pub pid: u32,
    pub runtime: Arc<GoRuntime>,
    table: Arc<GoTable>,
    /// Runtime address less link-time address.
    bias: u64,
    memory: Memory,
    /// Whether the goroutine that started at a PC is one of the runtime's
    /// own (as `runtime.isSystemGoroutine` has it), by start PC.
    system: HashMap<u64, bool>,
}

impl GoProcess {
    #[must_use]
    pub fn new(pid: u32, runtime: Arc<GoRuntime>, table: Arc<GoTable>, bias: u64) -> Self {
        Self {
            pid,
            runtime,
            table,
            bias,
            memory: Memory { pid },
            system: HashMap::new(),
        }
    }

    /// Every user goroutine that is not running, with its stack. `keep`
    /// is asked with each one's index and the list's length whether to
    /// unwind it (all, or a sample of them).
    ///
    /// A goroutine may run and stop elsewhere between the read of its `g`
    /// and of its stack: each is read again after its stack, and one that
    /// moved is read on its own, up to [`RETRIES`] times, then counted in
    /// `torn` and left out.
    ///
    /// # Errors
    /// When the list or the goroutines cannot be read (the process
    /// exited, or the list moved mid-read): the read is dropped whole.
    pub fn read(&mut self, keep: &mut dyn FnMut(usize, usize) -> bool) -> Result<Read, ReadError> {
        let gs = self.goroutine_pointers()?;
        let headers = self.headers(&gs).map_err(ReadError::Goroutines)?;
        let mut chosen: Vec<(u64, Header)> = Vec::new();
        for (i, (&g, header)) in gs.iter().zip(headers).enumerate() {
            if header.status.is_some() && !self.is_system(header.startpc) && keep(i, gs.len()) {
                chosen.push((g, header));
            }
        }
        let stacks = self.stacks(chosen.iter().map(|(_, h)| h));
        let again = self
            .headers(&chosen.iter().map(|&(g, _)| g).collect::<Vec<_>>())
            .map_err(ReadError::Goroutines)?;
        let mut read = Read::default();
        for (((g, first), stack), second) in chosen.into_iter().zip(stacks).zip(again) {
            let seen = if first.same_stop(&second) {
                stack.map(|stack| (second, stack))
            } else {
                self.read_one(g)
            };
            let Some((header, stack)) = seen else {
                read.torn += 1;
                continue;
            };
            let Some(status) = header.status else {
                continue;
            };
            let frames = self.unwind(&header, &stack);
            if frames.is_empty() {
                read.torn += 1;
                continue;
            }
            read.goroutines.push(Observed {
                goid: header.goid,
                status,
                wait_reason: if status == Status::Waiting {
                    header.wait_reason
                } else {
                    0
                },
                stack: frames,
            });
        }
        Ok(read)
    }

    /// One goroutine's `g` and stack, read until its `g` is the same
    /// after its stack as before.
    fn read_one(&self, g: u64) -> Option<(Header, Vec<u8>)> {
        for _ in 0..RETRIES {
            let first = self.headers(&[g]).ok()?.pop()?;
            first.status?;
            let stack = self.stacks(std::iter::once(&first)).pop()??;
            let second = self.headers(&[g]).ok()?.pop()?;
            if first.same_stop(&second) {
                return Some((second, stack));
            }
        }
        None
    }

    /// The fields of each `g` at `gs`.
    fn headers(&self, gs: &[u64]) -> std::io::Result<Vec<Header>> {
        let layout = self.runtime.layout;
        let len = usize::try_from(layout.read_len()).unwrap_or(0).max(8);
        let ranges: Vec<(u64, usize)> = gs.iter().map(|&g| (g, len)).collect();
        let mut bytes = vec![0u8; len * gs.len()];
        self.memory.read_many(&ranges, &mut bytes)?;
        Ok(bytes
            .chunks_exact(len)
            .map(|g| Header::of(g, &layout))
            .collect())
    }

    /// The live part of each goroutine's stack, from its saved SP up
    /// (at most [`MAX_STACK_READ`] bytes): `None` for one that cannot be
    /// read.
    fn stacks<'a>(&self, headers: impl Iterator<Item = &'a Header>) -> Vec<Option<Vec<u8>>> {
        let ranges: Vec<(u64, usize)> = headers
            .map(|h| {
                let len = if h.sp == 0 || h.hi <= h.sp {
                    0
                } else {
                    (h.hi - h.sp).min(MAX_STACK_READ)
                };
                (h.sp, usize::try_from(len).unwrap_or(0))
            })
            .collect();
        let mut bytes = vec![0u8; ranges.iter().map(|r| r.1).sum()];
        let split = |bytes: Vec<u8>| {
            let mut at = 0;
            ranges
                .iter()
                .map(|&(_, len)| {
                    at += len;
                    (len > 0).then(|| bytes[at - len..at].to_vec())
                })
                .collect()
        };
        if self.memory.read_many(&ranges, &mut bytes).is_ok() {
            return split(bytes);
        }
        // One stack that cannot be read (freed as its goroutine exited)
        // fails the batch: read each on its own.
        ranges
            .iter()
            .map(|&(sp, len)| {
                let mut one = vec![0u8; len];
                (len > 0 && self.memory.read(sp, &mut one).is_ok()).then_some(one)
            })
            .collect()
    }

    /// The `g` pointers in `runtime.allgs`.
    fn goroutine_pointers(&self) -> Result<Vec<u64>, ReadError> {
        let mut slice = [0u8; 16];
        self.memory
            .read(self.runtime.allgs.wrapping_add(self.bias), &mut slice)
            .map_err(ReadError::List)?;
        let (ptr, len) = (
            u64_at(&slice, 0).unwrap_or(0),
            u64_at(&slice, 8).unwrap_or(0),
        );
        if ptr == 0 || len > MAX_GOROUTINES {
            return Err(ReadError::Torn(len));
        }
        let count = usize::try_from(len).map_err(|_| ReadError::Torn(len))?;
        let mut words = vec![0u8; count * 8];
        self.memory.read(ptr, &mut words).map_err(ReadError::List)?;
        Ok(words
            .chunks_exact(8)
            .filter_map(|w| Some(u64::from_le_bytes(w.try_into().ok()?)))
            .filter(|&g| g != 0)
            .collect())
    }

    /// Whether the goroutine that started at `startpc` is the runtime's
    /// (a function of package runtime other than `runtime.main`): those
    /// are left out, as Go's own goroutine profile leaves them out.
    fn is_system(&mut self, startpc: u64) -> bool {
        let (table, bias) = (&self.table, self.bias);
        *self.system.entry(startpc).or_insert_with(|| {
            table
                .function_name(startpc.wrapping_sub(bias))
                .is_some_and(|name| name.starts_with("runtime.") && name != "runtime.main")
        })
    }

    /// The PCs of a goroutine stopped as `header` says, with `stack` the
    /// bytes from its SP up: each frame's return address is its SP delta
    /// above its SP. Empty when not even the first frame is known.
    fn unwind(&self, header: &Header, stack: &[u8]) -> Vec<u64> {
        if header.pc == 0 {
            return Vec::new();
        }
        let mut frames = vec![header.pc];
        let (mut pc, mut sp_off) = (header.pc, 0u64);
        while frames.len() < MAX_FRAMES {
            // A caller's PC is a return address: look it up at the call.
            let lookup = if frames.len() == 1 { pc } else { pc - 1 };
            let Some(delta) = self.table.sp_delta(lookup.wrapping_sub(self.bias)) else {
                break;
            };
            let Ok(delta) = u64::try_from(delta) else {
                break;
            };
            let Some(ret) = u64_at(stack, sp_off + delta) else {
                break;
            };
            if ret == 0 {
                break;
            }
            frames.push(ret);
            pc = ret;
            sp_off += delta + 8;
        }
        frames
    }
}

/// The fields of one `g` the reader uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    status: Option<Status>,
    goid: u64,
    wait_reason: u8,
    pc: u64,
    sp: u64,
    hi: u64,
    startpc: u64,
}

impl Header {
    fn of(g: &[u8], layout: &Layout) -> Self {
        let field = |at: u64| u64_at(g, at).unwrap_or(0);
        let low = |at: u64, mask: u64| field(at) & mask;
        Self {
            status: Status::of(u32::try_from(low(layout.atomicstatus, 0xffff_ffff)).unwrap_or(0)),
            goid: field(layout.goid),
            wait_reason: u8::try_from(low(layout.waitreason, 0xff)).unwrap_or(0),
            pc: field(layout.sched_pc),
            sp: field(layout.sched_sp),
            hi: field(layout.stack_hi),
            startpc: field(layout.startpc),
        }
    }

    /// Whether `later` is the same goroutine stopped at the same place.
    fn same_stop(&self, later: &Self) -> bool {
        (self.goid, self.status, self.pc, self.sp) == (later.goid, later.status, later.pc, later.sp)
    }
}

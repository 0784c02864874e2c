//! One Go process's goroutines, read from outside: the runtime's list
//! (`runtime.allgs`), each goroutine's status and wait reason, and the
//! stack of each one that is not running, unwound from where it stopped
//! (`g.sched`) with the binary's `.gopclntab` SP deltas.
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::{
    g::{Core, GoroutineStatus, start_and_creation},
    labels::LabelSets,
    runtime::GoRuntime,
};
use crate::{
    gopclntab::GoTable,
    process::memory::{Memory, u64_at},
    sample::Label,
};

/// The most goroutines a list may claim before it is taken as torn.
const MAX_GOROUTINES: u64 = 1 << 22;
/// Stack bytes read per goroutine, from its saved SP up.
const MAX_STACK_READ: u64 = 64 * 1024;
/// Frames kept per stack.
const MAX_FRAMES: usize = 128;
/// Reads of a goroutine that moved while read, before it is left out.
const RETRIES: usize = 3;

/// One goroutine seen in one read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub goid: u64,
    pub status: GoroutineStatus,
    /// Index into the runtime's wait reasons (0 when not waiting).
    pub wait_reason: u8,
    /// Runtime PCs, leaf first: where it stopped, then return addresses.
    pub stack: Vec<u64>,
    /// The walk stopped at the frame or byte limit with frames left.
    pub truncated: bool,
    /// The function whose `go` statement created it.
    pub created_by: Arc<str>,
    /// Its pprof labels, sorted by key.
    pub labels: Arc<[Label]>,
}

/// What one read of a process found.
#[derive(Debug, Default)]
pub struct Read {
    pub goroutines: Vec<Observed>,
    /// One in how many goroutines of the list were read: each stands
    /// for this many.
    pub stride: usize,
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

/// What stays true of a goroutine while it lives, learnt once per `g`
/// and goroutine id (the runtime reuses a `g` for a new goroutine).
struct Identity {
    goid: u64,
    /// One of the runtime's own (as `runtime.isSystemGoroutine` has it):
    /// left out, as Go's goroutine profile leaves them out.
    system: bool,
    created_by: Arc<str>,
}

/// A Go process being read.
pub struct GoProcess {
    pub pid: u32,
    pub runtime: Arc<GoRuntime>,
    table: Arc<GoTable>,
    /// Runtime address less link-time address.
    bias: u64,
    memory: Memory,
    /// By `g` address.
    identities: FxHashMap<u64, Identity>,
    /// Function names by PC, for `startpc`, `gopc` and the return into
    /// `runtime.goexit`.
    names: FxHashMap<u64, Arc<str>>,
    /// SP deltas by (link-time) PC: the same few PCs recur in every read.
    deltas: FxHashMap<u64, Option<i32>>,
    /// Whether each (link-time) stopped PC is a function's entry.
    entries: FxHashMap<u64, bool>,
    labels: LabelSets,
    /// Its goroutines' waits, followed to their wakers
    /// (`--goroutine-wakers`).
    pub(super) waits: Option<super::wakers::Waits>,
}

impl GoProcess {
    #[must_use]
    pub fn new(pid: u32, runtime: Arc<GoRuntime>, table: Arc<GoTable>, bias: u64) -> Self {
        let labels = LabelSets::new(runtime.labels, Memory { pid });
        Self {
            pid,
            runtime,
            table,
            bias,
            memory: Memory { pid },
            identities: FxHashMap::default(),
            names: FxHashMap::default(),
            deltas: FxHashMap::default(),
            entries: FxHashMap::default(),
            labels,
            waits: None,
        }
    }

    /// Every user goroutine that is not running, with its stack: all of
    /// them when the list holds at most `budget`, else one in N, starting
    /// at `rotation` (so that successive reads take turns).
    ///
    /// A goroutine may run and stop elsewhere between the read of its `g`
    /// and of its stack: each is read again after its stack, and one that
    /// moved is read on its own, up to [`RETRIES`] times, then counted in
    /// `torn` and left out.
    ///
    /// # Errors
    /// When the list or the goroutines cannot be read (the process
    /// exited, or the list moved mid-read): the read is dropped whole.
    pub fn read(&mut self, budget: usize, rotation: usize) -> Result<Read, ReadError> {
        let all = self.goroutine_pointers()?;
        let stride = all.len().div_ceil(budget.max(1)).max(1);
        let gs: Vec<u64> = all
            .into_iter()
            .enumerate()
            .filter(|&(i, _)| (i + rotation).is_multiple_of(stride))
            .map(|(_, g)| g)
            .collect();
        let cores = self.cores(&gs).map_err(ReadError::Goroutines)?;
        self.learn(&gs, &cores);
        let chosen: Vec<(u64, Core)> = gs
            .into_iter()
            .zip(cores)
            .filter(|(g, core)| core.status.is_some() && !self.identity(*g, core.goid).0)
            .collect();
        let stacks = self.stacks(chosen.iter().map(|(_, c)| c));
        let again = self
            .cores(&chosen.iter().map(|&(g, _)| g).collect::<Vec<_>>())
            .map_err(ReadError::Goroutines)?;
        let mut read = Read {
            stride,
            ..Read::default()
        };
        let sets = self.labels.of_many(chosen.iter().map(|(_, c)| c.labels));
        for (((g, first), stack), second) in chosen.into_iter().zip(stacks).zip(again) {
            let seen = if first.same_stop(&second) {
                stack.map(|stack| (second, stack))
            } else {
                self.read_one(g)
            };
            let Some((core, stack)) = seen else {
                read.torn += 1;
                continue;
            };
            let Some(status) = core.status else { continue };
            let (frames, truncated) = self.unwind(&core, &stack);
            if frames.is_empty() {
                read.torn += 1;
                continue;
            }
            read.goroutines.push(Observed {
                goid: core.goid,
                status,
                wait_reason: if status == GoroutineStatus::Waiting {
                    core.wait_reason
                } else {
                    0
                },
                stack: frames,
                truncated,
                created_by: self.identity(g, core.goid).1,
                labels: sets
                    .get(&core.labels)
                    .cloned()
                    .unwrap_or_else(|| self.labels.of(core.labels)),
            });
        }
        Ok(read)
    }

    /// One goroutine's `g` and stack, read until its `g` is the same
    /// after its stack as before.
    fn read_one(&self, g: u64) -> Option<(Core, Vec<u8>)> {
        for _ in 0..RETRIES {
            let first = self.cores(&[g]).ok()?.pop()?;
            first.status?;
            let stack = self.stacks(std::iter::once(&first)).pop()??;
            let second = self.cores(&[g]).ok()?.pop()?;
            if first.same_stop(&second) {
                return Some((second, stack));
            }
        }
        None
    }

    /// The changing fields of each `g` at `gs`.
    fn cores(&self, gs: &[u64]) -> std::io::Result<Vec<Core>> {
        let layout = self.runtime.layout;
        let len = usize::try_from(layout.core_len()).unwrap_or(8);
        let ranges: Vec<(u64, usize)> = gs.iter().map(|&g| (g, len)).collect();
        let mut bytes = vec![0u8; len * gs.len()];
        self.memory.read_many(&ranges, &mut bytes)?;
        Ok(bytes
            .chunks_exact(len)
            .map(|g| Core::of(g, &layout))
            .collect())
    }

    /// Reads where each goroutine of `gs` not seen before started and
    /// was created, and names both.
    fn learn(&mut self, gs: &[u64], cores: &[Core]) {
        let new: Vec<(u64, u64)> = gs
            .iter()
            .zip(cores)
            .filter(|(g, c)| {
                c.status.is_some() && self.identities.get(g).is_none_or(|i| i.goid != c.goid)
            })
            .map(|(&g, c)| (g, c.goid))
            .collect();
        let layout = self.runtime.layout;
        let (offset, len) = layout.tail();
        let len = usize::try_from(len).unwrap_or(16);
        let ranges: Vec<(u64, usize)> = new.iter().map(|&(g, _)| (g + offset, len)).collect();
        let mut bytes = vec![0u8; len * new.len()];
        if self.memory.read_many(&ranges, &mut bytes).is_err() {
            return;
        }
        for (&(g, goid), tail) in new.iter().zip(bytes.chunks_exact(len)) {
            let (startpc, gopc) = start_and_creation(tail, &layout);
            let start = self.name(startpc);
            let identity = Identity {
                goid,
                system: start.starts_with("runtime.") && &*start != "runtime.main",
                created_by: self.name(gopc),
            };
            self.identities.insert(g, identity);
        }
    }

    /// Whether the goroutine at `g` is the runtime's own, and what created
    /// it; (false, "") when not learnt.
    fn identity(&self, g: u64, goid: u64) -> (bool, Arc<str>) {
        match self.identities.get(&g) {
            Some(i) if i.goid == goid => (i.system, Arc::clone(&i.created_by)),
            _ => (false, Arc::from("")),
        }
    }

    /// The name of the function at runtime address `pc`; empty when none.
    fn name(&mut self, pc: u64) -> Arc<str> {
        let (table, bias) = (&self.table, self.bias);
        Arc::clone(self.names.entry(pc).or_insert_with(|| {
            table
                .function_name(pc.wrapping_sub(bias))
                .map_or_else(|| Arc::from(""), Arc::from)
        }))
    }

    /// The live part of each goroutine's stack, from its saved SP up
    /// (at most [`MAX_STACK_READ`] bytes): `None` for one that cannot be
    /// read.
    fn stacks<'a>(&self, cores: impl Iterator<Item = &'a Core>) -> Vec<Option<Vec<u8>>> {
        let ranges: Vec<(u64, usize)> = cores.map(|c| c.stack_range(MAX_STACK_READ)).collect();
        let mut bytes = vec![0u8; ranges.iter().map(|r| r.1).sum()];
        if self.memory.read_many(&ranges, &mut bytes).is_ok() {
            let mut at = 0;
            return ranges
                .iter()
                .map(|&(_, len)| {
                    at += len;
                    (len > 0).then(|| bytes[at - len..at].to_vec())
                })
                .collect();
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

    /// Where a stopped goroutine's PC is named: at the call it returns
    /// from (`g.sched.pc` is `mcall`'s return address, `g.syscallpc`
    /// `entersyscall`'s), one byte back, as Go's own traceback does, so a
    /// call that ends an inlined function (`goyield` in `semrelease1`) is
    /// named in it; at a function's entry (a goroutine not started yet),
    /// the PC itself. The profile's leaf address is then that byte.
    fn leaf_lookup(&mut self, pc: u64) -> u64 {
        let at = pc.wrapping_sub(self.bias);
        let table = &self.table;
        let entry = *self
            .entries
            .entry(at)
            .or_insert_with(|| table.function_entry(at) == Some(at));
        if entry { pc } else { pc - 1 }
    }

    /// The PCs of a goroutine stopped as `core` says, with `stack` the
    /// bytes from its SP up: each frame's return address is its SP delta
    /// above its SP, up to `runtime.goexit` as Go's own traceback stops.
    /// Empty when not even the first frame is known; and
    /// whether the walk stopped at [`MAX_FRAMES`] or at the end of a
    /// stack read cut at [`MAX_STACK_READ`], with frames left.
    ///
    /// Above `runtime.asyncPreempt` (which the runtime's preemption signal
    /// makes the goroutine call wherever it was) the word is the PC it was
    /// interrupted at, not a return address: its frame is looked up there,
    /// not one byte back (the byte before an instruction right after the
    /// prologue's `SUB SP` has the delta before it, which read a wrong word
    /// and ended the walk), and recorded one byte on, so that it is named
    /// at that PC too.
    fn unwind(&mut self, core: &Core, stack: &[u8]) -> (Vec<u64>, bool) {
        if core.pc == 0 {
            return (Vec::new(), false);
        }
        let cut = stack.len() as u64 == MAX_STACK_READ;
        let mut frames = vec![self.leaf_lookup(core.pc)];
        let (mut pc, mut sp_off) = (core.pc, 0u64);
        // Whether `pc` is where its function was stopped (the leaf's, an
        // interrupted one's), not a return address.
        let mut exact = true;
        while frames.len() < MAX_FRAMES {
            // A caller's PC is a return address: look it up at the call.
            let lookup = if exact { pc } else { pc - 1 };
            let at = lookup.wrapping_sub(self.bias);
            let table = &self.table;
            let Some(delta) = *self.deltas.entry(at).or_insert_with(|| table.sp_delta(at)) else {
                break;
            };
            let Ok(delta) = u64::try_from(delta) else {
                break;
            };
            let Some(ret) = u64_at(stack, sp_off + delta) else {
                return (frames, cut);
            };
            if ret == 0 {
                break;
            }
            exact = &*self.name(lookup) == "runtime.asyncPreempt";
            frames.push(if exact { ret + 1 } else { ret });
            // The goroutine's first frame returns into `runtime.goexit`:
            // the words above it are whatever a reused stack held before.
            if &*self.name(ret - 1) == "runtime.goexit" {
                break;
            }
            pc = ret;
            sp_off += delta + 8;
        }
        let truncated = frames.len() == MAX_FRAMES;
        (frames, truncated)
    }
}

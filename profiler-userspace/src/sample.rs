//! What the sources record before anything is symbolized: the kernel's
//! aggregated entries and the goroutine reader's rows, with their stacks
//! as addresses. Both `bpf/` and `goroutines/` produce these; this file
//! imports nothing of the crate.
use std::sync::Arc;

use profiler_common::{
    maps::{SAMPLES_MAX_ENTRIES, STACKS_MAX_ENTRIES},
    sample::ThreadState,
};

/// A captured stack, or why there is none.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Stack {
    /// Instruction pointers, leaf first.
    Frames(Arc<[u64]>),
    /// The same, cut at the frame limit with frames left (the walk went
    /// on past `MAX_STACK_DEPTH`): shown with a `[truncated]` root frame.
    Truncated(Arc<[u64]>),
    /// No such context: a kernel thread has no user stack, a sample taken
    /// in user mode has no kernel stack.
    Absent,
    /// Capture failed with this errno (or the stack was missing from the
    /// window's stack map: ENOENT); the weight is kept under a marker.
    Lost { errno: i32 },
    /// Function names only, leaf first (a blocked thread's kernel stack
    /// from `/proc/<pid>/task/<tid>/stack`).
    Named(Arc<[String]>),
    /// Not captured: the thread was still off the CPU when the window
    /// ended, and its user stack can only be read when it runs.
    StillOffCpu,
}

/// One aggregated kernel entry of a window.
#[derive(Clone, Debug)]
pub struct RawSample {
    pub pid: u32,
    pub tid: u32,
    /// The thread's name as the kernel saw it.
    pub thread: String,
    pub state: ThreadState,
    pub user_stack: Stack,
    pub kernel_stack: Stack,
    /// Number of on-CPU samples.
    pub samples: u64,
    /// Debiased off-CPU nanoseconds.
    pub off_cpu_ns: u64,
    /// Debiased off-CPU events, in `off_cpu::COUNT_SCALE` units.
    pub off_cpu_count: u64,
    /// The goroutine a row of the goroutine view is about (then `tid` is
    /// 0 and the weight is `goroutine_ns`).
    pub goroutine: Option<Arc<Goroutine>>,
    /// Nanoseconds the goroutine spent not running.
    pub goroutine_ns: u64,
}

/// Which goroutine a row is about, and what it was doing.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Goroutine {
    /// The runtime's goroutine id (`g.goid`).
    pub id: u64,
    pub status: GoroutineStatus,
    /// The runtime's name for what it waits on (`chan receive`, `sleep`,
    /// ...); empty unless it is waiting.
    pub wait_reason: Arc<str>,
    /// The function whose `go` statement created it; empty when unknown.
    pub created_by: Arc<str>,
}

/// What a goroutine that is not running is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GoroutineStatus {
    /// Ready to run, waiting for a thread (`_Grunnable`, `_Gpreempted`).
    Runnable,
    /// In a system call (`_Gsyscall`).
    Syscall,
    /// Parked (`_Gwaiting`): the wait reason says on what.
    Waiting,
}

impl GoroutineStatus {
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

/// How many entries the kernel's maps held when drained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapEntries {
    pub samples: u32,
    pub stacks: u32,
}

impl MapEntries {
    /// Fill of the samples and stacks maps, 0 to 1.
    #[must_use]
    pub fn fill(self) -> (f64, f64) {
        (
            f64::from(self.samples) / f64::from(SAMPLES_MAX_ENTRIES),
            f64::from(self.stacks) / f64::from(STACKS_MAX_ENTRIES),
        )
    }
}

//! The fields of one runtime `g` the reader uses, as read from its bytes.
use super::layout::Layout;
use crate::process::memory::u64_at;

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

/// A goroutine's status from `g.atomicstatus`, without its `_Gscan` bit;
/// `None` for a goroutine that is running (its time is in the on-CPU
/// samples), dead, or being created or moved.
#[must_use]
pub fn status_of(raw: u32) -> Option<GoroutineStatus> {
    match raw & !0x1000 {
        1 | 9 => Some(GoroutineStatus::Runnable),
        3 => Some(GoroutineStatus::Syscall),
        4 => Some(GoroutineStatus::Waiting),
        _ => None,
    }
}

/// The fields that change as a goroutine runs and stops: the first
/// [`Layout::core_len`] bytes of its `g`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Core {
    pub status: Option<GoroutineStatus>,
    pub goid: u64,
    pub wait_reason: u8,
    /// Where it stopped (`sched.pc`, `sched.sp`) and where its stack ends.
    pub pc: u64,
    pub sp: u64,
    pub hi: u64,
    /// Its pprof label set (`g.labels`; 0: none).
    pub labels: u64,
}

impl Core {
    #[must_use]
    pub fn of(g: &[u8], layout: &Layout) -> Self {
        let field = |at: u64| u64_at(g, at).unwrap_or(0);
        Self {
            status: status_of(u32::try_from(field(layout.atomicstatus) & 0xffff_ffff).unwrap_or(0)),
            goid: field(layout.goid),
            wait_reason: u8::try_from(field(layout.waitreason) & 0xff).unwrap_or(0),
            pc: field(layout.sched_pc),
            sp: field(layout.sched_sp),
            hi: field(layout.stack_hi),
            labels: field(layout.labels),
        }
    }

    /// Whether `later` is the same goroutine stopped at the same place.
    #[must_use]
    pub fn same_stop(&self, later: &Self) -> bool {
        (self.goid, self.status, self.pc, self.sp) == (later.goid, later.status, later.pc, later.sp)
    }

    /// The stack bytes to read: from the saved SP to the stack's end, at
    /// most `max`; empty for a goroutine with no saved SP.
    #[must_use]
    pub fn stack_range(&self, max: u64) -> (u64, usize) {
        let len = if self.sp == 0 || self.hi <= self.sp {
            0
        } else {
            (self.hi - self.sp).min(max)
        };
        (self.sp, usize::try_from(len).unwrap_or(0))
    }
}

/// The fields fixed for a goroutine's life (`startpc`, `gopc`), from the
/// bytes at [`Layout::tail`].
#[must_use]
pub fn start_and_creation(tail: &[u8], layout: &Layout) -> (u64, u64) {
    let (start, _) = layout.tail();
    let field = |at: u64| u64_at(tail, at - start).unwrap_or(0);
    (field(layout.startpc), field(layout.gopc))
}

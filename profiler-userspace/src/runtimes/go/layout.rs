//! Where a goroutine's fields are in the runtime's `g` (`known.rs` has
//! them for the Go versions this reader knows without DWARF).

/// Offsets (bytes) of the fields of `runtime.g` the reader uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// `stack.lo` and `stack.hi`: the goroutine's stack bounds.
    pub stack_lo: u64,
    pub stack_hi: u64,
    /// `sched.sp`, `sched.pc`, `sched.bp`: where a goroutine that is not
    /// running stopped.
    pub sched_sp: u64,
    pub sched_pc: u64,
    pub sched_bp: u64,
    /// A `uint32` (`atomic.Uint32` from Go 1.20).
    pub atomicstatus: u64,
    pub goid: u64,
    /// A `uint8` index into the runtime's `waitReasonStrings`.
    pub waitreason: u64,
    /// The PC of the `go` statement that created the goroutine.
    pub gopc: u64,
    /// The PC of the function the goroutine started in.
    pub startpc: u64,
    /// `g.labels`: its pprof labels (a `*labelMap`; 0: none).
    pub labels: u64,
    /// `g.m`, and `m.curg`: the thread a goroutine runs on, and the user
    /// goroutine a thread runs (the kernel's way from the thread's `g`,
    /// which may be its system stack's, to the labels).
    pub m: u64,
    pub m_curg: u64,
}

impl Layout {
    /// How many bytes of a `g`, from its start, hold the fields that
    /// change as it runs (all but `startpc`, `gopc` and `m`).
    #[must_use]
    pub fn core_len(&self) -> u64 {
        [
            self.stack_hi,
            self.sched_sp,
            self.sched_pc,
            self.sched_bp,
            self.atomicstatus,
            self.goid,
            self.waitreason,
            self.labels,
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
            + 8
    }

    /// Where `startpc` and `gopc` are: offset and length of the bytes
    /// that hold both.
    #[must_use]
    pub fn tail(&self) -> (u64, u64) {
        let start = self.startpc.min(self.gopc);
        (start, self.startpc.max(self.gopc) + 8 - start)
    }
}

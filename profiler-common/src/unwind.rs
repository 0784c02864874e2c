//! Table-driven unwinding of user stacks: the tables the daemon builds from
//! `.eh_frame`/`.debug_frame` and the kernel walks, and the pure steps of
//! that walk (row search: `search.rs`; one frame), shared so both sides agree and the
//! steps are unit tested here.
//!
//! Layout (see ARCHITECTURE.md, "The unwinder"):
//! - [`crate::maps::UNWIND_ROWS`]: one big array of [`UnwindRow`]s. Each
//!   binary's table is a sorted run of rows in it, followed by its bucket
//!   index (see [`bucket_rows`]), built once per binary and shared by every
//!   process that maps it.
//! - [`crate::maps::UNWIND_PROCS`]: pid -> [`ProcessMappings`], the
//!   executable mappings of a process, each pointing at its binary's run of
//!   rows (or at none: frame pointers are used there).
//! - [`crate::maps::UNWIND_FILES`]: a mapped file -> its table, for a
//!   process not published yet ([`by_file`]).
//!
//! A row says how to find the canonical frame address (CFA) for the PCs
//! from its `pc` up to the next row's: the return address is at CFA - 8,
//! and the caller's `rbp` is either unchanged or saved at a fixed offset
//! from the CFA. That covers what compilers emit for x86-64 code; the rare
//! rule that does not fit becomes a [`RowKind::FramePointer`] row.

pub mod by_file;
mod search;

pub use search::{SearchRange, found, narrow, probe, search, search_in};

/// Deepest user stack the kernel walks (frames), the kernel's
/// `PERF_MAX_STACK_DEPTH` like [`crate::stack::MAX_STACK_DEPTH`].
#[expect(clippy::cast_possible_truncation, reason = "127")]
pub const MAX_FRAMES: u32 = crate::stack::MAX_STACK_DEPTH as u32;

/// Executable mappings kept per process (a power of two: the kernel masks
/// indices with it).
pub const MAX_MAPPINGS: usize = 256;

/// Binary-search steps over one table: enough for 2^24 rows (more than any
/// binary has; the builder refuses larger tables).
pub const ROW_SEARCH_STEPS: u32 = 24;

/// Most rows one table may have: within [`ROW_SEARCH_STEPS`], and a count
/// that fits [`UnwindMapping::table`]'s 24 bits.
pub const MAX_TABLE_ROWS: u32 = (1 << ROW_SEARCH_STEPS) - 1;

/// Rows per bucket of a table's index, on average at most: the walk
/// searches one bucket's rows (a few cache lines), not the whole table.
pub const ROWS_PER_BUCKET: u32 = 16;

/// Binary-search steps over a process's mappings (2^8 = [`MAX_MAPPINGS`]).
pub const MAPPING_SEARCH_STEPS: u32 = 9;

/// What a row tells the walker to do.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowKind {
    /// No usable rule here (a gap between functions, or a rule this format
    /// cannot express): follow the frame pointer for this frame.
    FramePointer = 0,
    /// CFA = rsp + `cfa_offset`.
    Rsp = 1,
    /// CFA = rbp + `cfa_offset`.
    Rbp = 2,
    /// A PLT stub: CFA = rsp + 8, plus 8 once the stub has pushed its
    /// argument, i.e. when `(pc & 15) >= cfa_offset`.
    Plt = 3,
    /// The `rt_sigreturn` trampoline: rsp points at the `ucontext` of the
    /// interrupted code, whose registers are restored from it.
    Signal = 4,
    /// The outermost frame (the return address is undefined): stop.
    End = 5,
    /// CFA = rbp + `cfa_offset`, in a function that moved rsp to another
    /// stack by hand (Go's clock reads call the vDSO on the system stack):
    /// its caller's frame is on the stack it came from, which may lie
    /// below this one, so the walk does not require the CFA above rsp.
    SwitchedStack = 6,
}

impl RowKind {
    /// Decodes a row's `kind` byte; unknown values walk by frame pointer.
    #[must_use]
    pub const fn from_raw(raw: u8) -> Self {
        match raw {
            1 => Self::Rsp,
            2 => Self::Rbp,
            3 => Self::Plt,
            4 => Self::Signal,
            5 => Self::End,
            6 => Self::SwitchedStack,
            _ => Self::FramePointer,
        }
    }
}

/// One row of an unwind table: the rule from `pc` to the next row's `pc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct UnwindRow {
    /// First PC of the row, relative to the table's base address.
    pub pc: u32,
    /// CFA offset from rsp or rbp (see [`RowKind`]).
    pub cfa_offset: u16,
    /// A [`RowKind`] as `u8`.
    pub kind: u8,
    /// The caller's rbp is saved at CFA + 8 * `rbp_offset`; 0: unchanged.
    pub rbp_offset: i8,
}

/// One executable mapping of a process, as the kernel walker sees it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnwindMapping {
    /// First address of the mapping.
    pub start: u64,
    /// One past its last address.
    pub end: u64,
    /// What to subtract from a PC to get a row PC ([`UnwindRow::pc`]).
    pub bias: u64,
    /// Index in [`crate::maps::UNWIND_ROWS`] of the table's first row.
    pub first_row: u32,
    /// The table's number of rows (low 24 bits; 0: no table, walk this
    /// binary by frame pointer) and the shift of its index's buckets (high
    /// 8 bits): packed by [`UnwindMapping::pack_table`], read by
    /// [`UnwindMapping::rows`] and [`UnwindMapping::bucket_shift`].
    pub table: u32,
}

impl UnwindMapping {
    /// The packed [`UnwindMapping::table`] of a table of `rows` rows (at
    /// most [`MAX_TABLE_ROWS`]) with buckets `2^shift` bytes wide.
    #[must_use]
    pub const fn pack_table(rows: u32, shift: u32) -> u32 {
        (rows & MAX_TABLE_ROWS) | (shift << 24)
    }

    /// The table's number of rows; its index follows them.
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    #[must_use]
    pub const fn rows(&self) -> u32 {
        self.table & MAX_TABLE_ROWS
    }

    /// Its index's buckets are `2^shift` bytes of row PCs wide.
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    #[must_use]
    pub const fn bucket_shift(&self) -> u32 {
        self.table >> 24
    }
}

/// The executable mappings of one process, sorted by `start`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessMappings {
    /// Number of valid entries in `mappings`.
    pub len: u32,
    /// Non-zero when the process had more mappings than fit.
    pub overflow: u32,
    pub mappings: [UnwindMapping; MAX_MAPPINGS],
}

impl Default for ProcessMappings {
    fn default() -> Self {
        Self {
            len: 0,
            overflow: 0,
            mappings: [UnwindMapping::default(); MAX_MAPPINGS],
        }
    }
}

/// Walker registers: what the kernel tracks from frame to frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Regs {
    pub pc: u64,
    pub sp: u64,
    pub bp: u64,
}

/// Offsets in the signal frame's `ucontext` (rsp at `__restore_rt` points
/// at it): `uc_mcontext` is at 40, and in it rbp, rsp, rip at 80, 120, 128.
pub const UCONTEXT_RBP: u64 = 40 + 80;
pub const UCONTEXT_RSP: u64 = 40 + 120;
pub const UCONTEXT_RIP: u64 = 40 + 128;

/// Where one step of the walk reads the caller's registers from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The caller's pc is at `ra_at`, its rsp is `cfa`, and its rbp is at
    /// `bp_at` (or unchanged when `None`).
    Frame {
        cfa: u64,
        ra_at: u64,
        bp_at: Option<u64>,
    },
    /// A signal frame: pc, rsp and rbp are read from these addresses, and
    /// the next pc is exact (not a return address).
    Signal { pc_at: u64, sp_at: u64, bp_at: u64 },
    /// The stack ends here.
    End,
}

/// The step for `regs` under `kind`/`cfa_offset`/`rbp_offset` (a row, or
/// the frame-pointer rule when no row applies).
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
#[must_use]
pub fn step(kind: RowKind, cfa_offset: u16, rbp_offset: i8, regs: &Regs) -> Step {
    let cfa = match kind {
        RowKind::End => return Step::End,
        RowKind::Signal => {
            return Step::Signal {
                pc_at: regs.sp.wrapping_add(UCONTEXT_RIP),
                sp_at: regs.sp.wrapping_add(UCONTEXT_RSP),
                bp_at: regs.sp.wrapping_add(UCONTEXT_RBP),
            };
        }
        // The frame-pointer convention: [rbp] is the caller's rbp, the
        // return address sits above it.
        RowKind::FramePointer => {
            return Step::Frame {
                cfa: regs.bp.wrapping_add(16),
                ra_at: regs.bp.wrapping_add(8),
                bp_at: Some(regs.bp),
            };
        }
        RowKind::Rsp => regs.sp.wrapping_add(u64::from(cfa_offset)),
        RowKind::Rbp | RowKind::SwitchedStack => regs.bp.wrapping_add(u64::from(cfa_offset)),
        RowKind::Plt => {
            let pushed = if regs.pc & 15 >= u64::from(cfa_offset) {
                8
            } else {
                0
            };
            regs.sp.wrapping_add(8 + pushed)
        }
    };
    let bp_at = if rbp_offset == 0 {
        None
    } else {
        Some(cfa.wrapping_add_signed(i64::from(rbp_offset) * 8))
    };
    Step::Frame {
        cfa,
        ra_at: cfa.wrapping_sub(8),
        bp_at,
    }
}

/// Entries of the bucket index of a table of `rows` rows.
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
#[must_use]
pub const fn bucket_count(rows: u32) -> u32 {
    rows / ROWS_PER_BUCKET + 1
}

/// The bucket of row PC `rel` in a table of `rows` rows whose buckets are
/// `2^shift` bytes wide; the last bucket also holds every PC past it.
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
#[must_use]
pub const fn bucket_of(rel: u32, shift: u32, rows: u32) -> u32 {
    let bucket = rel >> (shift & 31);
    let last = bucket_count(rows) - 1;
    if bucket < last { bucket } else { last }
}

/// The rows `[lo, hi)` to search for a PC in `bucket` of a table of `rows`
/// rows. Entry `b` of the index (`entry_at(b)`) is the last row whose pc is
/// at or below the bucket's first PC (`b << shift`), so the row of a PC in
/// bucket `b` lies from entry `b` to entry `b + 1`. An index that does not
/// fit the table (a bug, or rows rewritten under the walk) gives the whole
/// table; a failed read, `None`.
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub fn bucket_rows(
    rows: u32,
    bucket: u32,
    entry_at: impl Fn(u32) -> Option<u32>,
) -> Option<(u32, u32)> {
    let lo = entry_at(bucket)?;
    let hi = if bucket + 1 < bucket_count(rows) {
        entry_at(bucket + 1)?.saturating_add(1)
    } else {
        rows
    };
    Some(if lo < hi && hi <= rows {
        (lo, hi)
    } else {
        (0, rows)
    })
}

/// The bucket shift of the index of `rows` (sorted by pc): the narrowest
/// power-of-two buckets that cover the table in [`bucket_count`] buckets.
#[must_use]
pub fn bucket_shift(rows: &[UnwindRow]) -> u32 {
    let count = bucket_count(u32::try_from(rows.len()).unwrap_or(u32::MAX));
    let last = rows.last().map_or(0, |r| r.pc);
    (0..32).find(|&s| last >> s < count).unwrap_or(31)
}

/// The entries of the bucket index of `rows` (sorted by pc) with buckets
/// `2^shift` bytes wide, as [`bucket_rows`] reads them: for each bucket,
/// the last row whose pc is at or below the bucket's first PC (0 if none).
pub fn bucket_entries(rows: &[UnwindRow], shift: u32) -> impl Iterator<Item = u32> + '_ {
    let count = bucket_count(u32::try_from(rows.len()).unwrap_or(u32::MAX));
    let mut last = 0usize;
    (0..count).map(move |bucket| {
        let first_pc = u64::from(bucket) << shift;
        while rows
            .get(last + 1)
            .is_some_and(|r| u64::from(r.pc) <= first_pc)
        {
            last += 1;
        }
        u32::try_from(last).unwrap_or(u32::MAX)
    })
}

/// The kernel walk keeps its range in map memory (see [`WalkState::lo`]),
/// read and written through volatile accesses so that the compiler keeps
/// it there.
impl SearchRange for WalkState {
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    fn get(&mut self) -> (u32, u32) {
        // SAFETY: both point into `self`, borrowed mutably.
        unsafe {
            (
                core::ptr::read_volatile(&raw const self.lo),
                core::ptr::read_volatile(&raw const self.hi),
            )
        }
    }

    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    fn set(&mut self, (lo, hi): (u32, u32)) {
        // SAFETY: both point into `self`, borrowed mutably.
        unsafe {
            core::ptr::write_volatile(&raw mut self.lo, lo);
            core::ptr::write_volatile(&raw mut self.hi, hi);
        }
    }
}

#[cfg(feature = "user")]
mod pod {
    use super::{ProcessMappings, UnwindRow};

    // SAFETY: UnwindRow is repr(C): u32, u16, u8, i8, 8 bytes with no
    // padding, and every bit pattern is valid.
    unsafe impl aya::Pod for UnwindRow {}
    // SAFETY: ProcessMappings is repr(C): two u32 then 32-byte entries of
    // three u64 and two u32, no padding, and every bit pattern is valid.
    unsafe impl aya::Pod for ProcessMappings {}
}

// The layouts both sides agree on, checked wherever this crate is built
// (the eBPF target included): no padding.
const _: () = assert!(size_of::<UnwindRow>() == 8);
const _: () = assert!(size_of::<UnwindMapping>() == 32);
const _: () = assert!(size_of::<ProcessMappings>() == 8 + 32 * MAX_MAPPINGS);

/// The kernel walk's state between iterations (a per-CPU map value:
/// `bpf_loop` callbacks see only what a map holds).
#[repr(C)]
pub struct WalkState {
    pub pc: u64,
    pub sp: u64,
    pub bp: u64,
    /// The last frame's mapping (none while `end` is 0): a caller is most
    /// often in its callee's binary, found again without a lookup.
    pub mapping: UnwindMapping,
    pub pid: u32,
    /// Non-zero when `pc` is exact (frame 0, or after a signal frame).
    pub exact_pc: u32,
    /// The open range `[lo, hi)` of the search under way. In this map
    /// value, not in registers, so the verifier sees unknown values and
    /// prunes the search's two branches into one state per probe.
    pub lo: u32,
    pub hi: u32,
    pub len: u32,
    pub truncated: u32,
    pub by_table: u32,
    pub by_frame_pointer: u32,
    pub without_table: u32,
    /// Mappings found through the file they map ([`by_file`]).
    pub by_file: u32,
    /// Non-zero when the walk met a process the daemon has not published
    /// (or a mapping it has not): the daemon is asked once the walk ends.
    /// Its bits: [`crate::process::ASK_NOW`], [`crate::process::ASK_LATER`].
    pub ask_mappings: u32,
    /// The walk's step at the current PC (`profiler-ebpf`'s `unwind/frame.rs`:
    /// record it, find its mapping, find its row).
    pub phase: u32,
    /// The Python frames' walk, in a Python process.
    pub python: crate::python::PythonWalk,
    /// The Java frames' walk, in a JVM.
    pub java: crate::java::JavaWalk,
    /// The search of the process's own mappings, for a PC of a process not
    /// published yet ([`by_file`]).
    pub maple: by_file::MapleWalk,
}

#[cfg(test)]
mod tests;

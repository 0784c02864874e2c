//! Every map of the kernel side, in one place. Names and sizes come from
//! `profiler_common::maps` so userspace looks them up by the same names.
use core::{
    ffi::c_void,
    intrinsics::{AtomicOrdering, atomic_xadd},
};

use aya_ebpf::{
    Global,
    bindings::{BPF_F_MMAPABLE, BPF_F_NO_PREALLOC, BPF_NOEXIST, task_struct},
    btf_maps,
    macros::{btf_map, map},
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
};
use profiler_common::{
    go::{GoProcess, LabelSetSeen},
    go_wake::{GoWake, GoWakeKey},
    java::{FrameSeen, JavaProcess},
    maps::{
        CONTROL_ACTIVE_SLOT, CONTROL_LAST_FLIP_NS, CONTROL_LEN, GO_BINARIES_MAX_ENTRIES,
        GO_LABEL_REQUESTS_MAX_ENTRIES, GO_LABEL_SETS_MAX_ENTRIES, GO_PROCS_MAX_ENTRIES,
        GO_WAKES_MAX_ENTRIES, IN_FLIGHT_MAX_ENTRIES, INTERVAL_CELLS_LEN,
        JAVA_FRAME_REQUESTS_MAX_ENTRIES, JAVA_FRAMES_MAX_ENTRIES, JAVA_PROCS_MAX_ENTRIES,
        PYTHON_CODE_REQUESTS_MAX_ENTRIES, PYTHON_CODES_MAX_ENTRIES, PYTHON_PROCS_MAX_ENTRIES,
        PYTHON_THREADS_MAX_ENTRIES, RANG_GO_LABELS, RANG_JAVA, RANG_MAPPINGS, RANG_PYTHON,
        RUNTIME_PROCS_MAX_ENTRIES, SAMPLES_MAX_ENTRIES, STACKS_MAX_ENTRIES,
        TARGET_COMMS_MAX_ENTRIES, TARGET_FILTER_SLOTS, TARGETS_MAX_ENTRIES,
        THREAD_ATTRS_MAX_ENTRIES, THREAD_CTX_PROCS_MAX_ENTRIES, UNWIND_DOORBELL_BYTES,
        UNWIND_FILES_MAX_ENTRIES, UNWIND_PROCS_MAX_ENTRIES, UNWIND_REQUESTS_MAX_ENTRIES,
        UNWIND_ROWS_DEFAULT_ENTRIES, WAKERS_MAX_ENTRIES, target_filter_slot,
    },
    process::{ProcessOffsets, ProcessSeen, RootSeen},
    python::{CodeSeen, FRAME_READ_MAX, PythonProcess},
    runtimes::Runtimes,
    sample::{COMM_LEN, SampleKey, SampleValue},
    sched::{SchedOffsets, SwitchCpu},
    stack::StackTrace,
    stats::{STATS_LEN, Stat},
    task::{IntervalCell, TaskState, TaskWork},
    thread_ctx::{ThreadAttrs, ThreadCtxProcess},
    unwind::{
        ProcessMappings, UnwindRow, WalkState,
        by_file::{FileKey, FileOffsets, FileTable},
    },
    waker::WakerRecord,
};

use crate::task_storage::TaskStorage;

/// Non-zero: profile every process (`--all`); zero: only tgids in [`TARGETS`].
#[unsafe(no_mangle)]
static TARGET_ALL: Global<u8> = Global::new(0);

/// The process whose off-CPU intervals are never kept (the daemon under
/// `--all`); 0: none.
#[unsafe(no_mangle)]
static UNPROFILED_PID: Global<u32> = Global::new(0);

/// Off-CPU rate in nanoseconds (`--off-cpu-rate`); 0 keeps every interval.
#[unsafe(no_mangle)]
static OFF_CPU_RATE_NS: Global<u64> = Global::new(0);

/// Non-zero: the biased naive weighting, to demonstrate its bias in tests
/// (a test knob: not in a product build).
#[cfg(feature = "test-knobs")]
#[unsafe(no_mangle)]
static OFF_CPU_NAIVE: Global<u8> = Global::new(0);

/// Non-zero: the off-CPU programs return at once (the bench's floor; a
/// test knob: not in a product build).
#[cfg(feature = "test-knobs")]
#[unsafe(no_mangle)]
static OFF_CPU_DISPATCH_ONLY: Global<u8> = Global::new(0);

/// Non-zero: walk user stacks by the unwind tables; zero: by frame
/// pointers only (`--unwind frame-pointer`).
#[unsafe(no_mangle)]
static UNWIND_TABLES: Global<u8> = Global::new(1);

/// Non-zero: the task work kfunc calls are linked (see `off_cpu/task_work.rs`).
#[unsafe(no_mangle)]
static TASK_WORK_LINKED: Global<u8> = Global::new(0);

/// Non-zero: blocked weight names its waker (`--wakers`).
#[unsafe(no_mangle)]
static WAKERS: Global<u8> = Global::new(0);

/// How many [`INTERVAL_CELLS`] are in use (a power of two).
#[unsafe(no_mangle)]
static INTERVAL_CELLS_IN_USE: Global<u32> = Global::new(INTERVAL_CELLS_LEN);

/// Where a process's mount namespace and root are, from the kernel's BTF
/// (zeros: unknown). A plain static, as [`SCHED_OFFSETS`].
#[unsafe(no_mangle)]
static PROCESS_OFFSETS: ProcessOffsets = ProcessOffsets {
    nsproxy: 0,
    mnt_ns: 0,
    ns_inum: 0,
    fs: 0,
    root_dentry: 0,
    d_inode: 0,
    i_ino: 0,
    d_sb: 0,
    s_dev: 0,
    cgroups: 0,
    css_subsys: 0,
    css_subsys_len: 0,
};

/// The daemon's own mount namespace and root (zeros: unknown). A plain
/// static, as [`PROCESS_OFFSETS`].
#[unsafe(no_mangle)]
static OUR_ROOT: RootSeen = RootSeen {
    root_ino: 0,
    root_dev: 0,
    mnt_ns: 0,
};

/// Where a mapping's file is identified, from the kernel's BTF (zeros:
/// unknown). A plain static, as [`PROCESS_OFFSETS`].
#[unsafe(no_mangle)]
static FILE_OFFSETS: FileOffsets = FileOffsets {
    vm_start: 0,
    vm_end: 0,
    vm_pgoff: 0,
    vm_file: 0,
    f_inode: 0,
    i_ino: 0,
    i_size: 0,
    i_mtime_sec: 0,
    task_mm: 0,
    mm_root: 0,
};

/// `task_struct.thread.fsbase`, from the kernel's BTF (0: unknown).
#[unsafe(no_mangle)]
static FSBASE_OFFSET: Global<u32> = Global::new(0);

/// Offsets of the scheduler fields `sched_info` reads, from the kernel's BTF.
/// A plain static rather than a `Global`, so that each use loads the one
/// field it needs ([`sched_offset`]), not all eight.
#[unsafe(no_mangle)]
static SCHED_OFFSETS: SchedOffsets = SchedOffsets {
    run_delay: 0,
    last_queued: 0,
    cfs_rq: 0,
    rq: 0,
    clock: 0,
    pid: 0,
    tgid: 0,
    flags: 0,
};

#[map]
static CONTROL: Array<u64> = Array::with_max_entries(CONTROL_LEN, 0);

#[map]
static TARGETS: HashMap<u32, u8> = HashMap::with_max_entries(TARGETS_MAX_ENTRIES, 0);

/// Zero slots: no target there (see profiler_common::maps::TARGET_FILTER).
#[map]
static TARGET_FILTER: Array<u8> = Array::with_max_entries(TARGET_FILTER_SLOTS, 0);

/// `--comm` names: a process that execs into one becomes a target.
#[map]
static TARGET_COMMS: HashMap<[u8; COMM_LEN], u8> =
    HashMap::with_max_entries(TARGET_COMMS_MAX_ENTRIES, 0);

#[map]
static STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(STATS_LEN, 0);

// The window's maps take memory per entry in use, not up front: most
// windows hold a few hundred stacks of the 16,384 a slot allows, and the
// window loop drains a slot early when it fills (README, "Kernel memory").
#[map]
static SAMPLES_0: HashMap<SampleKey, SampleValue> =
    HashMap::with_max_entries(SAMPLES_MAX_ENTRIES, BPF_F_NO_PREALLOC);
#[map]
static SAMPLES_1: HashMap<SampleKey, SampleValue> =
    HashMap::with_max_entries(SAMPLES_MAX_ENTRIES, BPF_F_NO_PREALLOC);

#[map]
static STACKS_0: HashMap<u64, StackTrace> =
    HashMap::with_max_entries(STACKS_MAX_ENTRIES, BPF_F_NO_PREALLOC);
#[map]
static STACKS_1: HashMap<u64, StackTrace> =
    HashMap::with_max_entries(STACKS_MAX_ENTRIES, BPF_F_NO_PREALLOC);

#[map]
static WAKERS_0: HashMap<u64, WakerRecord> =
    HashMap::with_max_entries(WAKERS_MAX_ENTRIES, BPF_F_NO_PREALLOC);
#[map]
static WAKERS_1: HashMap<u64, WakerRecord> =
    HashMap::with_max_entries(WAKERS_MAX_ENTRIES, BPF_F_NO_PREALLOC);

/// Off-CPU state per tracked thread, stored off its task_struct.
#[unsafe(link_section = ".maps")]
#[unsafe(export_name = "TASKS")]
static TASKS: TaskStorage<TaskState> = TaskStorage::new();

/// The open intervals of tracked threads, by a cell per tid
/// (`off_cpu/interval_cell.rs`).
#[map]
static INTERVAL_CELLS: Array<IntervalCell> = Array::with_max_entries(INTERVAL_CELLS_LEN, 0);

/// By tid: the time up to which userspace accounted an open interval
/// (allocated per entry: only threads off the CPU at a window's end).
#[map]
static IN_FLIGHT: HashMap<u32, u64> =
    HashMap::with_max_entries(IN_FLIGHT_MAX_ENTRIES, BPF_F_NO_PREALLOC);

/// By tid: the task work that flushes a thread's pending weight on its way
/// back to user space (`off_cpu/task_work.rs`); created on its first kept interval.
/// A BTF map: the verifier finds the `bpf_task_work` field by its BTF.
#[btf_map]
static TASK_WORK: btf_maps::HashMap<
    u32,
    TaskWork,
    { IN_FLIGHT_MAX_ENTRIES as usize },
    { BPF_F_NO_PREALLOC as usize },
> = btf_maps::HashMap::new();

#[map]
static PENDING: Array<u64> = Array::with_max_entries(1, 0);

/// Per-CPU buffer stacks are captured into (too big for the BPF stack),
/// one per [`Scratch`] context.
#[map]
static STACK_SCRATCH: PerCpuArray<StackTrace> = PerCpuArray::with_max_entries(SCRATCH_CONTEXTS, 0);

/// Per-CPU sample keys being built, one per [`Scratch`] context: beside
/// the stacks' walk, an 80-byte key on the BPF stack passes the 512 bytes
/// a program's calls may use together (Linux 6.1's verifier counts it).
#[map]
static KEY_SCRATCH: PerCpuArray<SampleKey> = PerCpuArray::with_max_entries(SCRATCH_CONTEXTS, 0);

/// Per-CPU [`ProcessSeen`] of a request being made, one per [`Scratch`]
/// context: on the walk's stack it passed 512 bytes with its calls on
/// Linux 6.1.
#[map]
static PROCESS_SEEN_SCRATCH: PerCpuArray<ProcessSeen> =
    PerCpuArray::with_max_entries(SCRATCH_CONTEXTS, 0);

/// Unwind rows of every binary; the daemon sizes it at load time and
/// writes it through mmap.
#[map]
static UNWIND_ROWS: Array<UnwindRow> =
    Array::with_max_entries(UNWIND_ROWS_DEFAULT_ENTRIES, BPF_F_MMAPABLE);

/// Executable mappings per process (8 KiB each, allocated on insert).
#[map]
static UNWIND_PROCS: HashMap<u32, ProcessMappings> =
    HashMap::with_max_entries(UNWIND_PROCS_MAX_ENTRIES, BPF_F_NO_PREALLOC);

/// The table of each file whose table is in [`UNWIND_ROWS`], for processes
/// not in [`UNWIND_PROCS`] yet (allocated on insert).
#[map]
static UNWIND_FILES: HashMap<FileKey, FileTable> =
    HashMap::with_max_entries(UNWIND_FILES_MAX_ENTRIES, BPF_F_NO_PREALLOC);

/// Processes whose mappings the walker asked for.
#[map]
static UNWIND_REQUESTS: HashMap<u32, ProcessSeen> =
    HashMap::with_max_entries(UNWIND_REQUESTS_MAX_ENTRIES, 0);

/// How many times tasks have moved between cgroups since loading (see
/// profiler_common::maps::CGROUP_MOVES).
#[map]
static CGROUP_MOVES: Array<u64> = Array::with_max_entries(1, 0);

/// Rung when a request is new, so that the daemon serves it at once.
#[map]
static UNWIND_DOORBELL: RingBuf = RingBuf::with_byte_size(UNWIND_DOORBELL_BYTES, 0);

/// Per-CPU state of the user stack walk between `bpf_loop` iterations,
/// one per [`Scratch`] context.
#[map]
static UNWIND_STATE: PerCpuArray<WalkState> = PerCpuArray::with_max_entries(SCRATCH_CONTEXTS, 0);

/// This CPU's state for `sched_switch`, which alone uses it, with
/// interrupts off: one value, so that a switch-out looks up one per-CPU
/// entry for all it keeps per CPU.
#[map]
static SWITCH_CPU: PerCpuArray<SwitchCpu> = PerCpuArray::with_max_entries(1, 0);

/// Which per-CPU scratch entry a program uses. The cpu-clock sampler runs
/// from a timer interrupt, so it can interrupt a tracepoint program that
/// is walking a stack on the same CPU (`rseq_update` flushing off-CPU
/// weight, with interrupts on): sharing one entry, the sampler's walk
/// would overwrite the interrupted one mid-stack. `sched_waking` runs
/// from interrupts too (a timer's or a disk's wakeup).
#[derive(Clone, Copy)]
#[repr(u32)]
pub enum Scratch {
    /// Tracepoint programs but `sched_waking` (none runs from an
    /// interrupt, and `sched_switch` runs with interrupts off).
    Tracing = 0,
    /// The perf_event sampler.
    Sampling = 1,
    /// `sched_waking`: one program, which the kernel does not nest.
    Waking = 2,
}

/// Entries of each per-CPU scratch map: one per [`Scratch`] variant.
const SCRATCH_CONTEXTS: u32 = 3;

/// The errno a map insert with `BPF_NOEXIST` returns (negated) when the
/// key is there already.
pub const EEXIST: i32 = 17;

#[map]
static GO_PROCS: LruHashMap<u32, GoProcess> = LruHashMap::with_max_entries(GO_PROCS_MAX_ENTRIES, 0);

#[map]
static GO_BINARIES: Array<GoProcess> = Array::with_max_entries(GO_BINARIES_MAX_ENTRIES, 0);

#[map]
static GO_WAKES: LruHashMap<GoWakeKey, GoWake> =
    LruHashMap::with_max_entries(GO_WAKES_MAX_ENTRIES, 0);

/// What a goroutine's wakeup record starts as, before the probe fills it
/// in place (a record is too large for the probe's stack).
static EMPTY_GO_WAKE: GoWake = GoWake::EMPTY;

#[map]
static THREAD_CTX_PROCS: LruHashMap<u32, ThreadCtxProcess> =
    LruHashMap::with_max_entries(THREAD_CTX_PROCS_MAX_ENTRIES, 0);

#[map]
static THREAD_ATTRS: LruHashMap<u64, ThreadAttrs> =
    LruHashMap::with_max_entries(THREAD_ATTRS_MAX_ENTRIES, 0);

/// Per-CPU attributes being read, per [`Scratch`].
#[map]
static THREAD_ATTRS_SCRATCH: PerCpuArray<ThreadAttrs> =
    PerCpuArray::with_max_entries(SCRATCH_CONTEXTS, 0);

#[map]
static GO_LABEL_SETS: LruHashMap<LabelSetSeen, u8> =
    LruHashMap::with_max_entries(GO_LABEL_SETS_MAX_ENTRIES, 0);

/// Requests to the daemon (here and below) are allocated whole (as are the LRU maps): an
/// entry allocated on insert can fail for memory in the perf event's NMI
/// when a burst of new frames empties the CPU's cache (a JVM starting
/// lost about one in twenty of its first requests so).
#[map]
static GO_LABEL_REQUESTS: HashMap<LabelSetSeen, u8> =
    HashMap::with_max_entries(GO_LABEL_REQUESTS_MAX_ENTRIES, 0);

#[map]
static RUNTIME_PROCS: HashMap<u32, Runtimes> =
    HashMap::with_max_entries(RUNTIME_PROCS_MAX_ENTRIES, BPF_F_NO_PREALLOC);

#[map]
static PYTHON_PROCS: LruHashMap<u32, PythonProcess> =
    LruHashMap::with_max_entries(PYTHON_PROCS_MAX_ENTRIES, 0);

#[map]
static PYTHON_THREADS: LruHashMap<u32, u64> =
    LruHashMap::with_max_entries(PYTHON_THREADS_MAX_ENTRIES, 0);

#[map]
static PYTHON_CODES: LruHashMap<CodeSeen, u8> =
    LruHashMap::with_max_entries(PYTHON_CODES_MAX_ENTRIES, 0);

#[map]
static PYTHON_CODE_REQUESTS: HashMap<CodeSeen, u8> =
    HashMap::with_max_entries(PYTHON_CODE_REQUESTS_MAX_ENTRIES, 0);

#[map]
static JAVA_PROCS: LruHashMap<u32, JavaProcess> =
    LruHashMap::with_max_entries(JAVA_PROCS_MAX_ENTRIES, 0);

#[map]
static JAVA_FRAMES: LruHashMap<FrameSeen, u8> =
    LruHashMap::with_max_entries(JAVA_FRAMES_MAX_ENTRIES, 0);

#[map]
static JAVA_FRAME_REQUESTS: HashMap<FrameSeen, u8> =
    HashMap::with_max_entries(JAVA_FRAME_REQUESTS_MAX_ENTRIES, 0);

/// Per-CPU bytes of the Python frame being read, per [`Scratch`].
#[map]
static PYTHON_SCRATCH: PerCpuArray<[u8; FRAME_READ_MAX]> =
    PerCpuArray::with_max_entries(SCRATCH_CONTEXTS, 0);

/// The maps of the slot the kernel writes to in this window.
pub struct Slot {
    pub samples: &'static HashMap<SampleKey, SampleValue>,
    pub stacks: &'static HashMap<u64, StackTrace>,
    pub wakers: &'static HashMap<u64, WakerRecord>,
}

/// Returns the active double-buffer slot (see `profiler_common::maps`).
#[inline(always)]
pub fn active_slot() -> Slot {
    let slot = CONTROL.get(CONTROL_ACTIVE_SLOT).copied().unwrap_or(0);
    if slot == 0 {
        Slot {
            samples: &SAMPLES_0,
            stacks: &STACKS_0,
            wakers: &WAKERS_0,
        }
    } else {
        Slot {
            samples: &SAMPLES_1,
            stacks: &STACKS_1,
            wakers: &WAKERS_1,
        }
    }
}

/// This CPU's sample key being built for `context`, zeroed.
#[inline(always)]
pub fn key_scratch(context: Scratch) -> Option<&'static mut SampleKey> {
    let key = KEY_SCRATCH.get_ptr_mut(context as u32)?;
    // SAFETY: a per-CPU map value, valid for this program's run; programs
    // of one context do not nest on a CPU (see `Scratch`), so nothing else
    // uses it meanwhile. Zeroed in place (a literal would be built on the
    // stack first); all zeros is a valid key.
    unsafe {
        core::ptr::write_bytes(key, 0, 1);
        Some(&mut *key)
    }
}

/// This CPU's scratch stack trace for `context`.
#[inline(always)]
pub fn stack_scratch(context: Scratch) -> Option<*mut StackTrace> {
    STACK_SCRATCH.get_ptr_mut(context as u32)
}

/// The off-CPU sampling rate and whether to weight naively (never in a
/// product build).
#[inline(always)]
pub fn off_cpu_rule() -> (u64, bool) {
    #[cfg(feature = "test-knobs")]
    let naive = OFF_CPU_NAIVE.load() != 0;
    #[cfg(not(feature = "test-knobs"))]
    let naive = false;
    (off_cpu_rate(), naive)
}

/// The off-CPU sampling rate alone, for the switch-out's draw.
#[inline(always)]
pub fn off_cpu_rate() -> u64 {
    OFF_CPU_RATE_NS.load()
}

/// The tracked state of thread `task` (a tp_btf argument or
/// `bpf_get_current_task_btf()`, as the verifier requires).
#[inline(always)]
pub fn task(task: *mut task_struct) -> Option<*mut TaskState> {
    // SAFETY: callers pass task pointers the verifier knows as such.
    unsafe { TASKS.get(task) }
}

/// The interval cell of thread `tid`, whoever owns it.
#[inline(always)]
pub fn interval_cell(tid: u32) -> Option<*mut IntervalCell> {
    let cells = INTERVAL_CELLS_IN_USE.load();
    INTERVAL_CELLS.get_ptr_mut(profiler_common::maps::interval_cell(tid, cells))
}

/// Starts tracking a thread: its entry, zeroed if new; counts a refusal.
#[inline(always)]
pub fn track_task(task: *mut task_struct) -> Option<*mut TaskState> {
    // SAFETY: as in `task`.
    let entry = unsafe { TASKS.get_or_create(task) };
    if entry.is_none() {
        count(Stat::TaskMapFull, 1);
    }
    entry
}

/// Stops tracking a thread (it exited).
#[inline(always)]
pub fn forget_task(task: *mut task_struct, tid: u32) {
    // SAFETY: as in `task`.
    unsafe { TASKS.remove(task) };
    forget_tid(tid);
}

/// Drops what is kept by tid for a thread that no longer has that tid (it
/// exited, or took its process's pid at an exec).
#[inline(always)]
pub fn forget_tid(tid: u32) {
    let _ = IN_FLIGHT.remove(tid);
    let _ = TASK_WORK.remove(tid);
}

/// Whether blocked weight names its waker (`--wakers`).
#[inline(always)]
pub fn wakers() -> bool {
    WAKERS.load() != 0
}

/// Stores `record` under `hash` in the slot's wakers map; false when it
/// could not (counted).
#[inline(always)]
pub fn store_waker(slot: &Slot, hash: u64, record: &WakerRecord) -> bool {
    if slot.wakers.get_ptr(hash).is_some() {
        return true;
    }
    match slot.wakers.insert(hash, record, u64::from(BPF_NOEXIST)) {
        Ok(()) => true,
        Err(err) if err == -EEXIST => true,
        Err(_) => {
            count(Stat::WakersLost, 1);
            false
        }
    }
}

/// Whether flushes go by task work (the daemon linked its kfuncs).
#[inline(always)]
pub fn task_work_linked() -> bool {
    TASK_WORK_LINKED.load() != 0
}

/// Thread `tid`'s task work, created idle if it has none.
#[inline(always)]
pub fn task_work(tid: u32) -> Option<*mut TaskWork> {
    if let Some(work) = TASK_WORK.get_ptr_mut(tid) {
        return Some(work);
    }
    let idle = TaskWork::idle();
    TASK_WORK.insert(tid, &idle, u64::from(BPF_NOEXIST)).ok()?;
    TASK_WORK.get_ptr_mut(tid)
}

/// [`TASK_WORK`] as the map argument of the task work kfunc.
#[inline(always)]
pub fn task_work_map() -> *mut c_void {
    core::ptr::from_ref(&TASK_WORK).cast_mut().cast()
}

/// Monotonic time of the last window flip.
#[inline(always)]
pub fn last_flip_ns() -> u64 {
    CONTROL.get(CONTROL_LAST_FLIP_NS).copied().unwrap_or(0)
}

/// Takes the time up to which userspace accounted thread `tid`'s open
/// interval.
#[inline(always)]
pub fn take_accounted(tid: u32) -> Option<u64> {
    let until = IN_FLIGHT.get_ptr(tid).map(|p| {
        // SAFETY: a pointer from a successful lookup, valid for this run.
        unsafe { *p }
    })?;
    let _ = IN_FLIGHT.remove(tid);
    Some(until)
}

/// A pointer to the number of threads with pending weight.
#[inline(always)]
pub fn pending_counter() -> Option<*mut u64> {
    PENDING.get_ptr_mut(0)
}

/// Whether the off-CPU programs should return at once (the bench's floor).
#[cfg(feature = "test-knobs")]
#[inline(always)]
pub fn off_cpu_dispatch_only() -> bool {
    OFF_CPU_DISPATCH_ONLY.load() != 0
}

/// Never in a product build.
#[cfg(not(feature = "test-knobs"))]
#[inline(always)]
pub fn off_cpu_dispatch_only() -> bool {
    false
}

/// One of the offsets of the scheduler fields `sched_info` reads.
#[inline(always)]
pub fn sched_offset(field: impl Fn(&SchedOffsets) -> &u32) -> u32 {
    // SAFETY: a field of a static. The read is volatile because the loader
    // sets the static's bytes: the compiler must not fold in the zeros.
    unsafe { core::ptr::read_volatile(field(&SCHED_OFFSETS)) }
}

/// Where a process's mount namespace and root are.
#[inline(always)]
pub fn process_offsets() -> ProcessOffsets {
    // SAFETY: a static. The read is volatile because the loader sets the
    // static's bytes: the compiler must not fold in the zeros.
    unsafe { core::ptr::read_volatile(&raw const PROCESS_OFFSETS) }
}

/// The daemon's own mount namespace and root.
#[inline(always)]
fn our_root() -> RootSeen {
    // SAFETY: a static. The read is volatile because the loader sets the
    // static's bytes: the compiler must not fold in the zeros.
    unsafe { core::ptr::read_volatile(&raw const OUR_ROOT) }
}

/// Where a mapping's file is identified.
#[inline(always)]
pub fn file_offsets() -> FileOffsets {
    // SAFETY: a static. The read is volatile because the loader sets the
    // static's bytes: the compiler must not fold in the zeros.
    unsafe { core::ptr::read_volatile(&raw const FILE_OFFSETS) }
}

/// This CPU's [`SwitchCpu`].
#[inline(always)]
pub fn switch_cpu() -> Option<*mut SwitchCpu> {
    SWITCH_CPU.get_ptr_mut(0)
}

/// Whether user stacks are walked by the unwind tables.
#[inline(always)]
pub fn unwind_tables() -> bool {
    UNWIND_TABLES.load() != 0
}

/// Whether every process is a target.
#[inline(always)]
pub fn target_all() -> bool {
    TARGET_ALL.load() != 0
}

/// Whether `pid` (a tgid) is the process whose off-CPU intervals are
/// never kept.
#[inline(always)]
pub fn unprofiled_off_cpu(pid: u32) -> bool {
    pid == UNPROFILED_PID.load()
}

/// Whether `pid` (a tgid) is in the target set.
#[inline(always)]
pub fn is_target(pid: u32) -> bool {
    TARGETS.get_ptr(pid).is_some()
}

/// False when `pid` (a tgid) is certainly not a target; true when it may
/// be, which [`is_target`] settles.
#[inline(always)]
pub fn may_be_target(pid: u32) -> bool {
    TARGET_FILTER
        .get(target_filter_slot(pid))
        .is_some_and(|slot| *slot != 0)
}

/// Whether `comm` is one of the `--comm` names.
#[inline(always)]
pub fn is_target_comm(comm: &[u8; COMM_LEN]) -> bool {
    // SAFETY: only the presence of the value is used.
    unsafe { TARGET_COMMS.get(comm).is_some() }
}

/// Makes `pid` a target (a `--comm` match seen at exec); a full map
/// leaves it to the daemon's next look at `/proc`.
#[inline(always)]
pub fn add_target(pid: u32) {
    if let Some(slot) = TARGET_FILTER.get_ptr_mut(target_filter_slot(pid)) {
        // SAFETY: a pointer into an array map's value, valid for this run;
        // every writer only ever stores 1 here while targets are added.
        unsafe { *slot = 1 };
    }
    let _ = TARGETS.insert(pid, 1, 0);
}

/// Adds `by` to the calling CPU's counter `stat`.
#[inline(always)]
pub fn count(stat: Stat, by: u64) {
    if let Some(counter) = STATS.get_ptr_mut(stat as u32) {
        // SAFETY: the pointer comes from a successful per-CPU array lookup,
        // so it is valid and only this CPU writes to it; BPF programs are
        // not preempted by other programs touching the same per-CPU slot
        // (perf_event programs can nest over others only via NMI, which at
        // worst loses one increment of a statistic).
        unsafe { *counter += by };
    }
}

/// The mappings of process `pid`, if the daemon has published them.
#[inline(always)]
pub fn process_mappings(pid: u32) -> Option<&'static ProcessMappings> {
    // SAFETY: a value of a successful lookup, valid for this program's run;
    // the daemon replaces entries whole, never in place.
    unsafe { UNWIND_PROCS.get(pid) }
}

/// The table of the file `key` names, if the daemon has published it.
#[inline(always)]
pub fn file_table(key: &FileKey) -> Option<FileTable> {
    // SAFETY: a value of a successful lookup, copied at once.
    unsafe { UNWIND_FILES.get(key).copied() }
}

/// Asks the daemon for the mappings of `pid`, with what `see` reads of it
/// (only for a new request) in `context`'s scratch, and rings it when the
/// request is new and may not wait ([`ProcessSeen::deferrable`]: the walk
/// found it `deferrable`, and the process sees files where we do,
/// [`OUR_ROOT`]; the daemon reads one that does not at once, and a
/// request that does not ring waits for its poll). While asked, a no-op,
/// but for a request that may wait when this one may not: that one is
/// made urgent, and rung.
#[inline(always)]
pub fn request_mappings(
    pid: u32,
    context: u32,
    deferrable: bool,
    see: impl FnOnce(&mut ProcessSeen),
) {
    if let Some(waiting) = UNWIND_REQUESTS.get_ptr_mut(pid) {
        // SAFETY: a value of a successful lookup, valid for this run; the
        // daemon reads the field whole (a word), before or after this.
        unsafe {
            if !deferrable && (*waiting).deferrable != 0 {
                (*waiting).deferrable = 0;
                let _ = UNWIND_DOORBELL.output::<u32>(&RANG_MAPPINGS, 0);
            }
        }
        return;
    }
    let mut urgent = !deferrable;
    let stored = ask_mappings(
        pid,
        context,
        |seen| {
            see(seen);
            urgent |= !our_root().is_of(seen);
            seen.deferrable = u32::from(!urgent);
        },
        u64::from(BPF_NOEXIST),
    );
    if stored && urgent {
        let _ = UNWIND_DOORBELL.output::<u32>(&RANG_MAPPINGS, 0);
    }
}

/// Marks the request for `pid`'s mappings, if one waits, as of a process
/// that has exited ([`ProcessSeen::exited`]).
#[inline(always)]
pub fn mark_request_exited(pid: u32) {
    if let Some(waiting) = UNWIND_REQUESTS.get_ptr_mut(pid) {
        // SAFETY: a value of a successful lookup, valid for this run; the
        // daemon reads the field whole, before or after this.
        unsafe { (*waiting).exited = 1 };
    }
}

/// Forgets the mappings of `pid` (it exec'd): its next sample asks.
#[inline(always)]
pub fn forget_mappings(pid: u32) {
    let _ = UNWIND_PROCS.remove(pid);
}

/// Asks again about `pid` (it exec'd), with what `see` reads of it now,
/// if a request of it is still waiting: that one saw the old program (its
/// name, its root and namespace before a container's first process
/// entered them). Nothing else when none waits.
#[inline(always)]
pub fn renew_waiting_request(pid: u32, context: u32, see: impl FnOnce(&mut ProcessSeen)) {
    if UNWIND_REQUESTS.get_ptr(pid).is_some() && ask_mappings(pid, context, see, 0) {
        let _ = UNWIND_DOORBELL.output::<u32>(&RANG_MAPPINGS, 0);
    }
}

/// Forgets the mappings of `pid` (it exec'd) and asks for new ones, with
/// what `see` reads of it now: a request still waiting from before the
/// exec saw another program (its name, and its root and namespace if it
/// entered them on the way, as a container's first process does).
#[inline(always)]
pub fn invalidate_mappings(pid: u32, context: u32, see: impl FnOnce(&mut ProcessSeen)) {
    forget_mappings(pid);
    if ask_mappings(pid, context, see, 0) {
        let _ = UNWIND_DOORBELL.output::<u32>(&RANG_MAPPINGS, 0);
    }
}

/// Stores the request for `pid` (`flags`: whether it may replace one);
/// whether it was stored.
#[inline(always)]
fn ask_mappings(pid: u32, context: u32, see: impl FnOnce(&mut ProcessSeen), flags: u64) -> bool {
    let Some(seen) = PROCESS_SEEN_SCRATCH.get_ptr_mut(context) else {
        return false;
    };
    // SAFETY: a per-CPU map value, valid for this program's run; programs
    // of one context do not nest on a CPU (see `Scratch`). Zeroed in place
    // (a literal would be built on the stack first), a word at a time
    // (`write_bytes` calls `memset`: a frame more in the verifier's sum).
    let seen = unsafe {
        let words = seen.cast::<u64>();
        for i in 0..size_of::<ProcessSeen>() / 8 {
            words.add(i).write_volatile(0);
        }
        &mut *seen
    };
    see(seen);
    // By reference: a copy would be on the stack.
    let seen: &ProcessSeen = seen;
    UNWIND_REQUESTS.insert(pid, seen, flags).is_ok()
}

/// Counts a move of tasks between cgroups (or a cgroup renamed).
#[inline(always)]
pub fn count_cgroup_move() {
    if let Some(moves) = CGROUP_MOVES.get_ptr_mut(0) {
        // SAFETY: the pointer comes from a successful array lookup, valid
        // and 8-byte aligned for this run; moves on other CPUs add to it
        // at the same time, hence the atomic add.
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(moves, 1) };
    }
}

/// How many moves [`count_cgroup_move`] has counted.
#[inline(always)]
pub fn cgroup_moves() -> u64 {
    CGROUP_MOVES.get(0).copied().unwrap_or(0)
}

/// Row `index` of the unwind tables.
#[inline(always)]
pub fn unwind_row(index: u32) -> Option<&'static UnwindRow> {
    UNWIND_ROWS.get(index)
}

/// This CPU's stack walk state and scratch trace for the context numbered
/// `context` (a [`Scratch`] as passed through `bpf_loop`).
#[inline(always)]
pub fn walk_scratch(context: u32) -> Option<(*mut WalkState, *mut StackTrace)> {
    Some((
        UNWIND_STATE.get_ptr_mut(context)?,
        STACK_SCRATCH.get_ptr_mut(context)?,
    ))
}

/// Which runtimes' maps hold process `pid` (none for most).
#[inline(always)]
pub fn runtimes(pid: u32) -> Runtimes {
    // SAFETY: a value of a successful lookup, copied out at once.
    unsafe { RUNTIME_PROCS.get(pid) }
        .copied()
        .unwrap_or(Runtimes::NONE)
}

/// Where process `pid` keeps its thread context, when the daemon has
/// published it.
#[inline(always)]
pub fn thread_ctx_process(pid: u32) -> Option<&'static ThreadCtxProcess> {
    // SAFETY: a value of a successful lookup, valid for this program's run;
    // the daemon replaces entries whole.
    unsafe { THREAD_CTX_PROCS.get(pid) }
}

/// This CPU's buffer for a record's attributes, for the context
/// `context`.
#[inline(always)]
pub fn thread_attrs_scratch(context: Scratch) -> Option<*mut ThreadAttrs> {
    THREAD_ATTRS_SCRATCH.get_ptr_mut(context as u32)
}

/// Keeps the attributes `attrs` under `hash`, unless kept already.
#[inline(always)]
pub fn keep_thread_attrs(hash: u64, attrs: &ThreadAttrs) {
    if THREAD_ATTRS.get_ptr(hash).is_none() {
        let _ = THREAD_ATTRS.insert(hash, attrs, 0);
    }
}

/// The Go process `pid`, when the daemon has published one.
#[inline(always)]
pub fn go_process(pid: u32) -> Option<&'static GoProcess> {
    // SAFETY: a value of a successful lookup, valid for this program's run;
    // the daemon replaces entries whole.
    unsafe { GO_PROCS.get(pid) }
}

/// The Go binary probed under `index` (the probe's attach cookie).
#[inline(always)]
pub fn go_binary(index: u32) -> Option<&'static GoProcess> {
    GO_BINARIES.get(index)
}

/// The record of the wakeup of goroutine `key`, in the map, to fill in
/// place: the one there, or a fresh one; `None` when the map refuses it
/// (counted).
#[inline(always)]
pub fn go_wake(key: &GoWakeKey) -> Option<*mut GoWake> {
    if let Some(wake) = GO_WAKES.get_ptr_mut(key) {
        return Some(wake);
    }
    #[expect(
        clippy::needless_borrows_for_generic_args,
        reason = "by value, the record would be copied onto the program's stack"
    )]
    let inserted = GO_WAKES.insert(key, &EMPTY_GO_WAKE, 0);
    if let Err(err) = inserted {
        count(Stat::of_refusal(err, Stat::MapFull), 1);
        return None;
    }
    GO_WAKES.get_ptr_mut(key)
}

/// The Python process `pid`, when the daemon has published one.
#[inline(always)]
pub fn python_process(pid: u32) -> Option<&'static PythonProcess> {
    // SAFETY: a value of a successful lookup, valid for this program's run;
    // the daemon replaces entries whole.
    unsafe { PYTHON_PROCS.get(pid) }
}

/// What the walk needs of JVM `pid`, if it is one.
#[inline(always)]
pub fn java_process(pid: u32) -> Option<&'static JavaProcess> {
    // SAFETY: a value of a successful lookup, valid for this program's run;
    // the daemon replaces entries whole.
    unsafe { JAVA_PROCS.get(pid) }
}

/// The thread state last found for thread `tid`.
#[inline(always)]
pub fn python_thread(tid: u32) -> Option<u64> {
    // SAFETY: a value of a successful lookup, copied out at once.
    unsafe { PYTHON_THREADS.get(tid).copied() }
}

/// Remembers `tstate` as thread `tid`'s.
#[inline(always)]
pub fn set_python_thread(tid: u32, tstate: u64) {
    let _ = PYTHON_THREADS.insert(tid, tstate, 0);
}

/// Asks the daemon to read code object `seen` unless asked before, and
/// rings it when the request is new.
#[inline(always)]
pub fn note_python_code(seen: &CodeSeen) {
    ask_once(&PYTHON_CODES, &PYTHON_CODE_REQUESTS, seen, &RANG_PYTHON);
}

/// Asks the daemon to read Go label set `seen` unless asked before, and
/// rings it when the request is new.
#[inline(always)]
pub fn note_go_label_set(seen: &LabelSetSeen) {
    ask_once(&GO_LABEL_SETS, &GO_LABEL_REQUESTS, seen, &RANG_GO_LABELS);
}

/// Asks the daemon to name Java frame `seen` unless asked before, and
/// rings it when the request is new.
#[inline(always)]
pub fn note_java_frame(seen: &FrameSeen) {
    ask_once(&JAVA_FRAMES, &JAVA_FRAME_REQUESTS, seen, &RANG_JAVA);
}

/// Asks the daemon about `key` (something the walk recorded) once: in
/// `requests` for the daemon to take, rung (with the map's bit, `rang`)
/// when new, and marked in
/// `asked` only once the request is stored. A request the
/// map refuses (full, or no memory for the entry in this context) is
/// counted and asked again the next time the walk records it: marked
/// first, it would never be asked again, and a frame recorded in a burst
/// (a JVM starting) stayed unnamed for its process's life.
#[inline(always)]
fn ask_once<K>(asked: &LruHashMap<K, u8>, requests: &HashMap<K, u8>, key: &K, rang: &u32) {
    if asked.get_ptr(key).is_some() {
        return;
    }
    match requests.insert(key, 1, u64::from(BPF_NOEXIST)) {
        Ok(()) => {
            let _ = UNWIND_DOORBELL.output::<u32>(rang, 0);
        }
        Err(err) if err == -EEXIST => {}
        Err(_) => {
            count(Stat::RuntimeRequestsLost, 1);
            return;
        }
    }
    let _ = asked.insert(key, 1, 0);
}

/// This CPU's buffer for a Python frame's bytes, for the context
/// numbered `context`.
#[inline(always)]
pub fn python_scratch(context: u32) -> Option<*mut [u8; FRAME_READ_MAX]> {
    PYTHON_SCRATCH.get_ptr_mut(context)
}

/// Where `task_struct.thread.fsbase` is (0: unknown).
#[inline(always)]
pub fn fsbase_offset() -> u32 {
    FSBASE_OFFSET.load()
}

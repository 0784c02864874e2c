//! Names and sizes of the kernel maps, and the double-buffer slots.
//!
//! Aggregation maps come in two slots. The kernel writes into the slot named
//! by [`CONTROL`]`[`[`CONTROL_ACTIVE_SLOT`]`]`; userspace flips the slot at
//! the end of a window, then drains and clears the other one. Stack maps are
//! double-buffered too, so a window's stacks are cleared with its samples.

/// Number of double-buffer slots.
pub const SLOTS: u32 = 2;

/// Counts per (thread, stacks, state), slot 0. Key [`crate::sample::SampleKey`].
pub const SAMPLES_0: &str = "SAMPLES_0";
/// Counts per (thread, stacks, state), slot 1.
pub const SAMPLES_1: &str = "SAMPLES_1";
/// Stack traces referenced by [`SAMPLES_0`], hash -> [`crate::stack::StackTrace`].
pub const STACKS_0: &str = "STACKS_0";
/// Stack traces referenced by [`SAMPLES_1`].
pub const STACKS_1: &str = "STACKS_1";
/// Wakers named by [`SAMPLES_0`]'s blocked weight, hash ->
/// [`crate::waker::WakerRecord`] (`--wakers`).
pub const WAKERS_0: &str = "WAKERS_0";
/// Wakers named by [`SAMPLES_1`].
pub const WAKERS_1: &str = "WAKERS_1";
/// Per-CPU scratch [`crate::stack::StackTrace`] that stacks are captured into.
pub const STACK_SCRATCH: &str = "STACK_SCRATCH";
/// Per-CPU sample keys being built (too big for the BPF stack beside the
/// rest), one per context, as [`STACK_SCRATCH`].
pub const KEY_SCRATCH: &str = "KEY_SCRATCH";

/// Array of `u64` control words written by userspace.
pub const CONTROL: &str = "CONTROL";
/// Index in [`CONTROL`] of the slot the kernel currently writes to.
pub const CONTROL_ACTIVE_SLOT: u32 = 0;
/// Index in [`CONTROL`] of the monotonic time (ns) of the last slot flip.
pub const CONTROL_LAST_FLIP_NS: u32 = 1;
/// Number of entries in [`CONTROL`].
pub const CONTROL_LEN: u32 = 2;

/// Set of target process ids (tgid -> 1), used unless profiling everything.
pub const TARGETS: &str = "TARGETS";
/// A filter in front of [`TARGETS`] for `sched_switch`, which runs for
/// every context switch on the machine: one byte per slot
/// ([`target_filter_slot`]), zero when no target's tgid falls in it. A
/// zero slot passes over a thread with one array read (which the verifier
/// inlines), where a hash lookup is a call. Whoever adds a target sets its
/// slot first; the daemon clears a slot when the last target in it exits.
pub const TARGET_FILTER: &str = "TARGET_FILTER";
/// Process names of `--comm` ([`crate::sample::comm_key`] -> 1): a process
/// that execs into one of them becomes a target in the kernel at once, so
/// a short-lived match is profiled from its first instruction.
pub const TARGET_COMMS: &str = "TARGET_COMMS";
/// Per-CPU array of `u64` counters indexed by [`crate::stats::Stat`].
pub const STATS: &str = "STATS";

/// Off-CPU state per thread: task storage (`BPF_MAP_TYPE_TASK_STORAGE`) of
/// [`crate::task::TaskState`]; userspace looks a thread up by a pidfd.
pub const TASKS: &str = "TASKS";
/// Array of [`crate::task::IntervalCell`]: the open interval of a tracked
/// thread, in the cell [`interval_cell`] picks by its tid, when the thread
/// owns that cell (see [`crate::task`]).
pub const INTERVAL_CELLS: &str = "INTERVAL_CELLS";
/// Off-CPU intervals still open at a window's end: tid -> the
/// monotonic time (ns) up to which userspace already accounted the
/// interval. Written by userspace at the drain; read and deleted by the
/// kernel when the thread comes back, so each nanosecond is counted once.
/// Only a kept interval looks (one the threshold drops whole is dropped
/// for its rest too); an entry left behind is ignored by the thread's
/// later intervals, which all begin after it, and the daemon deletes it at
/// the next window's end, when it finds the thread back.
pub const IN_FLIGHT: &str = "IN_FLIGHT";

/// Single-entry array: number of threads whose kept weight waits for their
/// user stack, so the `rseq_update` and `sys_exit` hooks can return at once
/// when it is zero.
pub const PENDING: &str = "PENDING";

/// tid -> the BPF task work that flushes the thread's kept weight on its
/// way back to user space (kernels with task work, Linux 6.18). Only the
/// kernel uses it.
pub const TASK_WORK: &str = "TASK_WORK";

/// Unwind table rows of every binary, one sorted run per binary (an
/// mmap-able array: the daemon writes rows in place, then publishes them
/// through [`UNWIND_PROCS`]). See [`crate::unwind`].
pub const UNWIND_ROWS: &str = "UNWIND_ROWS";
/// pid -> [`crate::unwind::ProcessMappings`]: the executable mappings the
/// kernel walker uses for that process.
pub const UNWIND_PROCS: &str = "UNWIND_PROCS";
/// [`crate::unwind::by_file::FileKey`] -> [`crate::unwind::by_file::FileTable`]:
/// the table of each mapped file whose table is in [`UNWIND_ROWS`], for the
/// walk of a process whose mappings are not in [`UNWIND_PROCS`] yet.
pub const UNWIND_FILES: &str = "UNWIND_FILES";
/// pid -> [`crate::process::ProcessSeen`]: processes whose mappings the
/// walker needs (never seen, or a PC outside every known mapping: exec,
/// mmap, dlopen), with what the asking thread saw of its process. The
/// daemon reads them promptly, builds what is missing and deletes the
/// request.
pub const UNWIND_REQUESTS: &str = "UNWIND_REQUESTS";
/// Ring buffer written when a request is first put in [`UNWIND_REQUESTS`]
/// or a runtime's request map (each record a `u32`: [`RANG_MAPPINGS`],
/// [`RANG_PYTHON`], [`RANG_JAVA`] or [`RANG_GO_LABELS`]): the daemon wakes
/// on it and serves the maps rung at
/// once, instead of at its next poll. Only a doorbell: the request maps
/// stay what is served, so a full ring loses nothing but promptness.
pub const UNWIND_DOORBELL: &str = "UNWIND_DOORBELL";
/// One `u64`: how many times tasks have moved between cgroups (or a v1
/// cgroup was renamed) since loading, counted by the kernel; read into
/// each [`crate::process::ProcessSeen`] and by the daemon around its
/// reads of `/proc/PID/cgroup`.
pub const CGROUP_MOVES: &str = "CGROUP_MOVES";
/// Per-CPU state of the user stack walk between `bpf_loop` iterations.
pub const UNWIND_STATE: &str = "UNWIND_STATE";
/// Per-CPU [`crate::process::ProcessSeen`] of a request being made.
pub const PROCESS_SEEN_SCRATCH: &str = "PROCESS_SEEN_SCRATCH";
/// Per-CPU state of `sched_switch` ([`crate::sched::SwitchCpu`]): the
/// offset from the run queue's clock to ktime, measured again every 100 ms
/// (see `profiler-ebpf`'s `off_cpu/clock.rs`), the xorshift64* state of the
/// off-CPU sampling rule (seeded by the kernel on first use) and the count
/// of intervals seen, one entry for all.
pub const SWITCH_CPU: &str = "SWITCH_CPU";

/// pid -> [`crate::python::PythonProcess`]: where the walk finds a Python
/// process's eval loop, threads and frames (an LRU map: an entry left by
/// a process gone ages out).
pub const PYTHON_PROCS: &str = "PYTHON_PROCS";
/// tid -> the thread's `PyThreadState` address, as last found (an LRU
/// map). The walk checks it against the thread's `fsbase` before use.
pub const PYTHON_THREADS: &str = "PYTHON_THREADS";
/// [`crate::python::CodeSeen`] -> 1: code objects the walk has recorded
/// (an LRU map), so that each is asked for once.
pub const PYTHON_CODES: &str = "PYTHON_CODES";
/// [`crate::python::CodeSeen`] -> 1: code objects recorded for the first
/// time, which the daemon reads (and deletes) when the doorbell
/// ([`UNWIND_DOORBELL`]) rings or at its next poll.
pub const PYTHON_CODE_REQUESTS: &str = "PYTHON_CODE_REQUESTS";
/// Per-CPU bytes of the Python frame the walk is reading.
pub const PYTHON_SCRATCH: &str = "PYTHON_SCRATCH";
/// pid -> [`crate::go::GoProcess`]: where the on-CPU sample finds the
/// pprof labels of a Go process's running goroutine (an LRU map, as
/// [`PYTHON_PROCS`]).
pub const GO_PROCS: &str = "GO_PROCS";
/// [`crate::go::LabelSetSeen`] -> 1: label sets the samples have recorded
/// (an LRU map), so that each is asked for once.
pub const GO_LABEL_SETS: &str = "GO_LABEL_SETS";
/// [`crate::go::LabelSetSeen`] -> 1: label sets recorded for the first
/// time, which the daemon reads (and deletes) when the doorbell
/// ([`UNWIND_DOORBELL`]) rings or at its next poll.
pub const GO_LABEL_REQUESTS: &str = "GO_LABEL_REQUESTS";
/// [`crate::go_wake::GoWakeKey`] -> [`crate::go_wake::GoWake`]: each
/// goroutine's last wakeup, as `runtime.ready`'s probe saw it
/// (`--goroutine-wakers`; an LRU map, allocated whole).
pub const GO_WAKES: &str = "GO_WAKES";
/// Index -> [`crate::go::GoProcess`]: where the goroutines of each Go
/// binary probed for `--goroutine-wakers` keep what the probe reads; the
/// probe's attach cookie is the binary's index (an array, allocated
/// whole).
pub const GO_BINARIES: &str = "GO_BINARIES";
/// pid -> [`crate::thread_ctx::ThreadCtxProcess`]: where a process keeps
/// its OpenTelemetry thread context (an LRU map, as [`PYTHON_PROCS`]).
pub const THREAD_CTX_PROCS: &str = "THREAD_CTX_PROCS";
/// Hash -> [`crate::thread_ctx::ThreadAttrs`]: the attributes of the
/// thread context records the samples read, under the hash their keys
/// hold (an LRU map, allocated whole; the daemon reads it at each drain).
pub const THREAD_ATTRS: &str = "THREAD_ATTRS";
/// Per-CPU [`crate::thread_ctx::ThreadAttrs`] being read, one per scratch
/// context.
pub const THREAD_ATTRS_SCRATCH: &str = "THREAD_ATTRS_SCRATCH";
/// pid -> [`crate::java::JavaProcess`]: where the walk finds a JVM's code
/// cache and how its blobs are laid out (an LRU map, as [`PYTHON_PROCS`]).
pub const JAVA_PROCS: &str = "JAVA_PROCS";
/// pid -> [`crate::runtimes::Runtimes`]: which of [`PYTHON_PROCS`],
/// [`JAVA_PROCS`], [`GO_PROCS`] and [`THREAD_CTX_PROCS`] hold the process
/// (the daemon sets a bit after the entry and clears it before), so that
/// a sample of a process in none looks up one map, not four. Allocated
/// per entry: only the daemon inserts.
pub const RUNTIME_PROCS: &str = "RUNTIME_PROCS";
/// [`crate::java::FrameSeen`] -> 1: Java frames the walk has recorded (an
/// LRU map), so that each is asked for once.
pub const JAVA_FRAMES: &str = "JAVA_FRAMES";
/// [`crate::java::FrameSeen`] -> 1: Java frames recorded for the first
/// time, which the daemon names (and deletes) when the doorbell
/// ([`UNWIND_DOORBELL`]) rings or at its next poll.
pub const JAVA_FRAME_REQUESTS: &str = "JAVA_FRAME_REQUESTS";

/// Name of the load-time global that switches target filtering off (`--all`).
pub const GLOBAL_TARGET_ALL: &str = "TARGET_ALL";
/// Load-time global: under `--all`, the daemon's own process id, whose
/// off-CPU intervals are never kept (0: none left out). Its waits are
/// the daemon's loop sleeping, and keeping them cost it a stack walk at
/// most of its wakeups; its on-CPU samples stay (its cost, seen).
pub const GLOBAL_UNPROFILED_PID: &str = "UNPROFILED_PID";
/// Load-time global: the off-CPU rate in nanoseconds (`--off-cpu-rate`).
pub const GLOBAL_OFF_CPU_RATE_NS: &str = "OFF_CPU_RATE_NS";
/// Load-time global: non-zero selects the biased naive weighting (tests only).
pub const GLOBAL_OFF_CPU_NAIVE: &str = "OFF_CPU_NAIVE";
/// Non-zero: the off-CPU programs return at once. Only for the bench's
/// floor: what running them at all costs, before any work.
pub const GLOBAL_OFF_CPU_DISPATCH_ONLY: &str = "OFF_CPU_DISPATCH_ONLY";
/// Load-time global: non-zero walks user stacks by the unwind tables
/// (the default), zero by frame pointers only (`--unwind frame-pointer`).
pub const GLOBAL_UNWIND_TABLES: &str = "UNWIND_TABLES";
/// Load-time global: where the scheduler's run-queue accounting lives in
/// `task_struct` (a [`crate::sched::SchedOffsets`] from the kernel's BTF).
pub const GLOBAL_SCHED_OFFSETS: &str = "SCHED_OFFSETS";
/// Load-time global: non-zero when the object's task work kfunc calls are
/// linked (the daemon's `bpf/kfunc.rs`); zero keeps the calls, and the
/// callback they name, in code the verifier proves dead.
pub const GLOBAL_TASK_WORK: &str = "TASK_WORK_LINKED";
/// Load-time global: non-zero with `--wakers`, when blocked weight names
/// its waker (`crate::waker`).
pub const GLOBAL_WAKERS: &str = "WAKERS";
/// Load-time global: the offset of `task_struct.thread.fsbase` from the
/// kernel's BTF (0 without BTF: the Python walk then finds no thread).
pub const GLOBAL_FSBASE_OFFSET: &str = "FSBASE_OFFSET";
/// Load-time global: where a process's mount namespace and root are (a
/// [`crate::process::ProcessOffsets`] from the kernel's BTF; zeros without).
pub const GLOBAL_PROCESS_OFFSETS: &str = "PROCESS_OFFSETS";
/// Load-time global: the daemon's own mount namespace and root (a
/// [`crate::process::RootSeen`]; zeros when unknown): only the requests
/// of processes that share them may wait.
pub const GLOBAL_OUR_ROOT: &str = "OUR_ROOT";
/// Load-time global: where a mapping's file is identified (a
/// [`crate::unwind::by_file::FileOffsets`] from the kernel's BTF; zeros
/// without).
pub const GLOBAL_FILE_OFFSETS: &str = "FILE_OFFSETS";
/// How many [`INTERVAL_CELLS`] are in use (a power of two; fewer only in
/// tests, to make threads share cells).
pub const GLOBAL_INTERVAL_CELLS: &str = "INTERVAL_CELLS_IN_USE";

/// Every map of the eBPF object (besides aya-log's own). A test in
/// profiler-userspace checks the built object against this list both
/// ways, so a map renamed on one side only, or left unused, fails it.
pub const ALL: [&str; 44] = [
    SAMPLES_0,
    SAMPLES_1,
    STACKS_0,
    STACKS_1,
    WAKERS_0,
    WAKERS_1,
    STACK_SCRATCH,
    KEY_SCRATCH,
    CONTROL,
    TARGETS,
    TARGET_FILTER,
    TARGET_COMMS,
    STATS,
    TASKS,
    INTERVAL_CELLS,
    IN_FLIGHT,
    PENDING,
    TASK_WORK,
    UNWIND_ROWS,
    UNWIND_PROCS,
    UNWIND_FILES,
    UNWIND_REQUESTS,
    UNWIND_DOORBELL,
    CGROUP_MOVES,
    UNWIND_STATE,
    PROCESS_SEEN_SCRATCH,
    SWITCH_CPU,
    PYTHON_PROCS,
    PYTHON_THREADS,
    PYTHON_CODES,
    PYTHON_CODE_REQUESTS,
    PYTHON_SCRATCH,
    JAVA_PROCS,
    JAVA_FRAMES,
    JAVA_FRAME_REQUESTS,
    GO_PROCS,
    GO_LABEL_SETS,
    GO_LABEL_REQUESTS,
    GO_WAKES,
    GO_BINARIES,
    THREAD_CTX_PROCS,
    THREAD_ATTRS,
    THREAD_ATTRS_SCRATCH,
    RUNTIME_PROCS,
];

/// Every load-time global the daemon sets, checked the same way.
pub const GLOBALS: [&str; 11] = [
    GLOBAL_TARGET_ALL,
    GLOBAL_OFF_CPU_RATE_NS,
    GLOBAL_UNWIND_TABLES,
    GLOBAL_SCHED_OFFSETS,
    GLOBAL_TASK_WORK,
    GLOBAL_INTERVAL_CELLS,
    GLOBAL_FSBASE_OFFSET,
    GLOBAL_PROCESS_OFFSETS,
    GLOBAL_OUR_ROOT,
    GLOBAL_FILE_OFFSETS,
    GLOBAL_WAKERS,
];

/// The globals of the test knobs, in an object built with the feature
/// `test-knobs` only.
pub const TEST_KNOB_GLOBALS: [&str; 2] = [GLOBAL_OFF_CPU_NAIVE, GLOBAL_OFF_CPU_DISPATCH_ONLY];

/// Capacity of each [`SAMPLES_0`]/[`SAMPLES_1`] map.
pub const SAMPLES_MAX_ENTRIES: u32 = 32_768;
/// Capacity of each stack map.
pub const STACKS_MAX_ENTRIES: u32 = 16_384;
/// Capacity of each wakers map.
pub const WAKERS_MAX_ENTRIES: u32 = 8_192;
/// Capacity of [`TARGETS`].
pub const TARGETS_MAX_ENTRIES: u32 = 4_096;
/// Slots of [`TARGET_FILTER`]: with a few targets, a thread of another
/// process shares a slot with one of them about once in a thousand.
pub const TARGET_FILTER_SLOTS: u32 = 4_096;

/// The [`TARGET_FILTER`] slot of process `pid`.
#[must_use]
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub const fn target_filter_slot(pid: u32) -> u32 {
    pid % TARGET_FILTER_SLOTS
}
/// Cells of [`INTERVAL_CELLS`] (48 bytes each: 3 MiB). Tids are handed
/// out in sequence, so live threads rarely share a cell: under `--all`
/// with 1,000 threads, about 1.5% of them find their cell taken and keep
/// their interval in task storage (counted as
/// [`crate::stats::Stat::IntervalCellTaken`]).
pub const INTERVAL_CELLS_LEN: u32 = 65_536;

/// The [`INTERVAL_CELLS`] cell of thread `tid`, of `cells` in use (a
/// power of two, at most [`INTERVAL_CELLS_LEN`]).
#[must_use]
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
pub const fn interval_cell(tid: u32, cells: u32) -> u32 {
    tid & (cells - 1)
}

/// Capacity of [`TARGET_COMMS`]: the most `--comm` names.
pub const TARGET_COMMS_MAX_ENTRIES: u32 = 64;
/// Capacity of [`PYTHON_PROCS`].
pub const PYTHON_PROCS_MAX_ENTRIES: u32 = 4_096;
/// Capacity of [`GO_PROCS`].
pub const GO_PROCS_MAX_ENTRIES: u32 = 4_096;
/// Capacity of [`THREAD_CTX_PROCS`].
pub const THREAD_CTX_PROCS_MAX_ENTRIES: u32 = 1_024;
/// Capacity of [`THREAD_ATTRS`]: distinct attribute sets (about 700 bytes
/// each: 2.9 MB); a set evicted before its window is drained leaves its
/// samples without attributes (counted).
pub const THREAD_ATTRS_MAX_ENTRIES: u32 = 4_096;
/// Capacity of [`GO_LABEL_SETS`] (allocated whole, as [`JAVA_FRAMES`]; a
/// set forgotten is asked for again, and found in the daemon's cache).
pub const GO_LABEL_SETS_MAX_ENTRIES: u32 = 4_096;
/// Capacity of [`GO_LABEL_REQUESTS`] (allocated whole; a full map refuses
/// the request, counted, and the set is asked for when next recorded).
pub const GO_LABEL_REQUESTS_MAX_ENTRIES: u32 = 4_096;
/// Capacity of [`GO_WAKES`] (288 bytes an entry: 1.2 MB): goroutines
/// woken and not looked up yet, over all Go targets. The reader looks a
/// goroutine up within a read (10 ms) of its wakeup; an entry evicted
/// before leaves its wait `[woken by unknown]`.
pub const GO_WAKES_MAX_ENTRIES: u32 = 4_096;
/// Capacity of [`GO_BINARIES`]: the most Go binaries probed while the
/// daemon runs (a probe stays until it exits).
pub const GO_BINARIES_MAX_ENTRIES: u32 = 256;
/// Capacity of [`RUNTIME_PROCS`]: each runtime map's, summed (a process
/// in several counts once).
pub const RUNTIME_PROCS_MAX_ENTRIES: u32 = PYTHON_PROCS_MAX_ENTRIES
    + JAVA_PROCS_MAX_ENTRIES
    + GO_PROCS_MAX_ENTRIES
    + THREAD_CTX_PROCS_MAX_ENTRIES;
/// Capacity of [`JAVA_PROCS`].
pub const JAVA_PROCS_MAX_ENTRIES: u32 = 1_024;
/// Capacity of [`JAVA_FRAMES`]: Java frames remembered as asked for (an
/// LRU map, allocated whole: about 96 bytes an entry; one forgotten is
/// asked for again, and named again from the daemon's cache).
pub const JAVA_FRAMES_MAX_ENTRIES: u32 = 16_384;
/// Capacity of [`JAVA_FRAME_REQUESTS`]: Java frames waiting for the daemon
/// (allocated whole; a full map refuses the request, counted, and the
/// frame is asked for when next recorded).
pub const JAVA_FRAME_REQUESTS_MAX_ENTRIES: u32 = 8_192;
/// Capacity of [`PYTHON_THREADS`].
pub const PYTHON_THREADS_MAX_ENTRIES: u32 = 16_384;
/// Capacity of [`PYTHON_CODES`]: code objects remembered as asked for
/// (allocated whole, as [`JAVA_FRAMES`]; one forgotten is asked for
/// again).
pub const PYTHON_CODES_MAX_ENTRIES: u32 = 16_384;
/// Capacity of [`PYTHON_CODE_REQUESTS`]: code objects waiting for the
/// daemon (allocated whole; a full map refuses the request, counted, and
/// the code object is asked for when next recorded).
pub const PYTHON_CODE_REQUESTS_MAX_ENTRIES: u32 = 8_192;
/// Capacity of [`IN_FLIGHT`]: threads off the CPU at a window's end.
pub const IN_FLIGHT_MAX_ENTRIES: u32 = 65_536;

/// Default capacity of [`UNWIND_ROWS`] (8-byte rows: 32 MiB); the daemon
/// sets the real size from `--unwind-table-memory`.
pub const UNWIND_ROWS_DEFAULT_ENTRIES: u32 = 4 << 20;
/// Capacity of [`UNWIND_PROCS`] (allocated per entry, not up front).
pub const UNWIND_PROCS_MAX_ENTRIES: u32 = 8_192;
/// Capacity of [`UNWIND_FILES`] (allocated per entry): a few files per
/// binary whose table is in the row array.
pub const UNWIND_FILES_MAX_ENTRIES: u32 = 16_384;
/// Bytes of [`UNWIND_DOORBELL`] (a page: 256 rings, in 16-byte records,
/// between two reads).
pub const UNWIND_DOORBELL_BYTES: u32 = 4_096;
/// A doorbell record's bit for a request in [`UNWIND_REQUESTS`].
pub const RANG_MAPPINGS: u32 = 1;
/// A doorbell record's bit for a request in [`PYTHON_CODE_REQUESTS`]; and
/// in [`JAVA_FRAME_REQUESTS`], and in [`GO_LABEL_REQUESTS`]. An empty request
/// map of 8,192 buckets costs a walk of them all to find empty, so each is
/// read only when its own bit rang (and at the poll): a Python process's
/// requests rang for the three maps, 20,480 buckets walked for 8,192.
pub const RANG_PYTHON: u32 = 2;
pub const RANG_JAVA: u32 = 4;
pub const RANG_GO_LABELS: u32 = 8;
/// Capacity of [`UNWIND_REQUESTS`].
pub const UNWIND_REQUESTS_MAX_ENTRIES: u32 = 1_024;

/// The map names of one slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotMaps {
    pub samples: &'static str,
    pub stacks: &'static str,
    pub wakers: &'static str,
}

/// Returns the map names of `slot`.
#[must_use]
pub const fn slot_maps(slot: u32) -> SlotMaps {
    if slot.is_multiple_of(SLOTS) {
        SlotMaps {
            samples: SAMPLES_0,
            stacks: STACKS_0,
            wakers: WAKERS_0,
        }
    } else {
        SlotMaps {
            samples: SAMPLES_1,
            stacks: STACKS_1,
            wakers: WAKERS_1,
        }
    }
}

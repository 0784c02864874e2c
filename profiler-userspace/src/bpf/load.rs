//! Loading the eBPF object and setting its targets; `load/attach.rs`
//! attaches the on-CPU sampler to every online CPU and the off-CPU
//! programs to their tracepoints.
use aya::{
    Ebpf, EbpfLoader,
    maps::Map,
    programs::{Program, ProgramError},
};
use profiler_common::{
    maps::{
        GLOBAL_FILE_OFFSETS, GLOBAL_FSBASE_OFFSET, GLOBAL_INTERVAL_CELLS,
        GLOBAL_OFF_CPU_DISPATCH_ONLY, GLOBAL_OFF_CPU_NAIVE, GLOBAL_OFF_CPU_RATE_NS,
        GLOBAL_OUR_ROOT, GLOBAL_PROCESS_OFFSETS, GLOBAL_SCHED_OFFSETS, GLOBAL_TARGET_ALL,
        GLOBAL_TASK_WORK, GLOBAL_UNPROFILED_PID, GLOBAL_UNWIND_TABLES, GLOBAL_WAKERS, GO_WAKES,
        GO_WAKES_MAX_ENTRIES, IN_FLIGHT, IN_FLIGHT_MAX_ENTRIES, INTERVAL_CELLS, TASK_WORK,
        UNWIND_DOORBELL, UNWIND_ROWS,
    },
    process::RootSeen,
    sched::SchedOffsets,
};

use super::{
    btf_fields::{BtfFieldError, KernelTypes},
    doorbell::Doorbell,
    drain::Windows,
    ebpf_log::{self, Logger},
    error::{KernelError, take_map},
    go_maps::GoTables,
    in_flight::InFlight,
    java_maps::JavaTables,
    kfunc::{self, Kfunc},
    python_maps::PythonTables,
    runtime_procs::RuntimeProcs,
    targets::TargetSet,
    thread_ctx_maps::ThreadCtxTables,
    unwind_maps::UnwindTables,
};
use crate::config::{Config, Target, Unwind, UserStacks};

mod attach;
mod interfaces;
#[cfg(test)]
mod tests;

/// Whether this build has the test knobs (and its object their globals).
const TEST_KNOBS: bool = cfg!(feature = "test-knobs");

/// The compiled eBPF object, built by build.rs from profiler-ebpf.
pub(super) static EBPF_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/profiler-ebpf"));

/// The kfuncs of the object (profiler-ebpf's `off_cpu/task_work.rs`): the task
/// work that takes an off-CPU user stack on the way back to user space, and
/// the preemption guard around it. Without all of them, the schedule call
/// reads `-EOPNOTSUPP` and the daemon attaches [`RSEQ_UPDATE`] instead.
pub(super) const KFUNCS: [Kfunc; 3] = [
    Kfunc {
        name: "bpf_task_work_schedule_resume_impl",
        fallback: -95,
    },
    Kfunc {
        name: "bpf_preempt_disable",
        fallback: 0,
    },
    Kfunc {
        name: "bpf_preempt_enable",
        fallback: 0,
    },
];

const ON_CPU_PROGRAM: &str = "on_cpu_sample";

/// Tells the user stack walker that a process's mappings changed (exec),
/// and a worker thread that execs its new tid (the pid); the cgroup hooks
/// count moves between cgroups (`process/placements.rs`).
const UNWIND_PROGRAMS: [(&str, &str); 4] = [
    ("sched_process_exec", "sched_process_exec"),
    ("cgroup_attach_task", "cgroup_attach_task"),
    ("cgroup_transfer_tasks", "cgroup_transfer_tasks"),
    ("cgroup_rename", "cgroup_rename"),
];

/// Off-CPU programs and the BTF tracepoints they attach to. The exit and
/// rename hooks come first so no thread is tracked before its exit and
/// its new names can be seen; the hooks that flush on the way back to
/// user space ([`RSEQ_UPDATE`], [`SYS_EXIT`]) are attached before these.
const OFF_CPU_PROGRAMS: [(&str, &str); 3] = [
    ("sched_process_exit", "sched_process_exit"),
    ("task_rename", "task_rename"),
    (SCHED_SWITCH, "sched_switch"),
];

/// The program that schedules task work: the one a verifier refuses for it.
const SCHED_SWITCH: &str = "sched_switch";

/// Flushes pending off-CPU weight as an rseq thread returns to user space:
/// once per context switch.
const RSEQ_UPDATE: (&str, &str) = ("rseq_update", "rseq_update");

/// Flushes pending off-CPU weight at every system call's exit: the
/// fallback without `rseq_update`, or with `--off-cpu-sys-exit`. Enabling
/// this tracepoint slows every system call of every process.
const SYS_EXIT: (&str, &str) = ("sys_exit", "sys_exit");

/// Notes who woke a kept interval (`--wakers`): runs at every wakeup on
/// the machine, so it is attached only when asked for.
const SCHED_WAKING: (&str, &str) = ("sched_waking", "sched_waking");

/// Notes who made a goroutine runnable (`--goroutine-wakers`): a uprobe on
/// each Go target binary's `runtime.ready`, loaded at the first.
const GO_READY: &str = "go_ready";

/// The loaded and attached programs, and their maps in parts, one per
/// interface: each part owns its maps (taken out of the object) and its
/// state, in the file of its interface. The parts' maps stay open as long
/// as the programs that were loaded with their fds.
pub struct Kernel {
    windows: Windows,
    targets: TargetSet,
    in_flight: InFlight,
    unwind: UnwindTables,
    python: PythonTables,
    java: JavaTables,
    go: GoTables,
    thread_ctx: ThreadCtxTables,
    runtime_procs: RuntimeProcs,
    /// `UNWIND_DOORBELL`, until [`Kernel::doorbell`] takes it.
    doorbell: Option<Map>,
    logger: Option<Logger>,
    /// The programs (attached), and the maps no part uses.
    ebpf: Ebpf,
}

/// Offsets a feature can do without: zeros (unknown) when this kernel has
/// no BTF or lacks a field, which is logged.
fn optional<T: Default>(
    types: Option<&KernelTypes>,
    read: impl FnOnce(&KernelTypes) -> Result<T, BtfFieldError>,
) -> T {
    types
        .and_then(|t| {
            read(t)
                .inspect_err(|e| tracing::debug!("{}", crate::error_chain(e)))
                .ok()
        })
        .unwrap_or_default()
}

impl Kernel {
    /// Loads the programs, fills the target set, then starts on-CPU
    /// sampling (every online CPU, once per sample period of CPU time) and
    /// off-CPU tracking, as configured.
    ///
    /// Task work that this kernel's verifier refuses from `sched_switch`
    /// (6.18 stable kernels that take its callback as sleepable, and so
    /// only from sleepable programs) is logged, and the object loaded
    /// again without it, as on kernels without the kfunc.
    ///
    /// `our_root` is the daemon's own mount namespace and root, which a
    /// process must share for its request for mappings to wait.
    ///
    /// # Errors
    /// When the kernel refuses the object, a map, a program or an attach.
    pub fn load(
        config: &Config,
        targets: &Target,
        our_root: RootSeen,
    ) -> Result<Self, KernelError> {
        let user_stacks = config.modes.off_cpu().map(|o| o.user_stacks);
        match Self::load_as(config, (targets, our_root), user_stacks) {
            Err(KernelError::LoadProgram { name, source })
                if name == SCHED_SWITCH
                    && user_stacks == Some(UserStacks::TaskWork)
                    && refuses_task_work(&source) =>
            {
                tracing::info!(
                    "off-CPU: this kernel refuses BPF task work from sched_switch ({}); \
                     user stacks are taken at rseq_update",
                    verifier_reason(&source)
                );
                tracing::debug!("the refused load: {}", crate::error_chain(&source));
                Self::load_as(config, (targets, our_root), Some(UserStacks::Rseq))
            }
            loaded => loaded,
        }
    }

    /// [`Self::load`], the off-CPU user stacks taken as `user_stacks` says
    /// (`None` without off-CPU profiling).
    fn load_as(
        config: &Config,
        (targets, our_root): (&Target, RootSeen),
        user_stacks: Option<UserStacks>,
    ) -> Result<Self, KernelError> {
        let target_all = u8::from(matches!(config.target, Target::All));
        // Its own waits are not profiled under `--all` (see the global).
        let unprofiled_pid = u32::from(target_all) * std::process::id();
        let rate_ns = config.modes.off_cpu().map_or(0, |o| o.rate_ns);
        let naive = u8::from(config.modes.off_cpu().is_some_and(|o| o.naive_weights));
        let dispatch_only = u8::from(config.modes.off_cpu().is_some_and(|o| o.dispatch_only));
        // Without off-CPU tracking, its maps keep one entry each.
        let interval_cells = config.modes.off_cpu().map_or(1, |o| o.interval_cells);
        let in_flight = config.modes.off_cpu().map_or(1, |_| IN_FLIGHT_MAX_ENTRIES);
        // Without the goroutine wakers' probe, one entry.
        let go_wakes = if config.goroutine_wakers {
            GO_WAKES_MAX_ENTRIES
        } else {
            1
        };
        let unwind_tables = u8::from(matches!(config.unwind, Unwind::Tables { .. }));
        let types = match KernelTypes::from_sys_fs() {
            Ok(types) => Some(types),
            Err(e) if config.modes.off_cpu().is_none() => {
                tracing::debug!("no kernel BTF, so no kfuncs: {}", crate::error_chain(&e));
                None
            }
            Err(e) => return Err(KernelError::SchedFields(e)),
        };
        let sched_offsets = match (&types, config.modes.off_cpu()) {
            (Some(types), Some(_)) => types.sched_offsets().map_err(KernelError::SchedFields)?,
            _ => SchedOffsets::default(),
        };
        // Without it the Python walk finds no thread, and Python frames
        // stay their eval loop's native frames.
        let fsbase_offset = types
            .as_ref()
            .and_then(|t| t.offset("task_struct", "thread.fsbase", "").ok())
            .unwrap_or(0);
        // Without them the daemon reads each new process's mount namespace
        // and root from `/proc`.
        let process_offsets = optional(types.as_ref(), KernelTypes::process_offsets);
        // Without them a new process's first samples are walked by frame
        // pointer until its mappings are published.
        let file_offsets = optional(types.as_ref(), KernelTypes::file_offsets);
        let task_work = user_stacks == Some(UserStacks::TaskWork);
        let wakers = config.modes.off_cpu().is_some_and(|o| o.wakers);
        let object = kfunc::link(EBPF_OBJECT, &KFUNCS, |name| {
            types.as_ref().filter(|_| task_work)?.func_id(name)
        })
        .map_err(KernelError::Kfuncs)?;
        drop(types);
        let mut ebpf = EbpfLoader::new()
            .override_global(GLOBAL_TARGET_ALL, &target_all, true)
            .override_global(GLOBAL_UNPROFILED_PID, &unprofiled_pid, true)
            .override_global(GLOBAL_OFF_CPU_RATE_NS, &rate_ns, true)
            // Test knobs: in the object only with the cargo feature.
            .override_global(GLOBAL_OFF_CPU_NAIVE, &naive, TEST_KNOBS)
            .override_global(GLOBAL_OFF_CPU_DISPATCH_ONLY, &dispatch_only, TEST_KNOBS)
            .override_global(GLOBAL_UNWIND_TABLES, &unwind_tables, true)
            .override_global(GLOBAL_SCHED_OFFSETS, &sched_offsets, true)
            .override_global(GLOBAL_TASK_WORK, &u8::from(object.kfuncs), true)
            .override_global(GLOBAL_INTERVAL_CELLS, &interval_cells, true)
            .override_global(GLOBAL_FSBASE_OFFSET, &fsbase_offset, true)
            .override_global(GLOBAL_PROCESS_OFFSETS, &process_offsets, true)
            .override_global(GLOBAL_OUR_ROOT, &our_root, true)
            .override_global(GLOBAL_FILE_OFFSETS, &file_offsets, true)
            .override_global(GLOBAL_WAKERS, &u8::from(wakers), true)
            .map_max_entries(UNWIND_ROWS, config.unwind.table_rows())
            .map_max_entries(INTERVAL_CELLS, interval_cells)
            .map_max_entries(IN_FLIGHT, in_flight)
            .map_max_entries(TASK_WORK, in_flight)
            .map_max_entries(GO_WAKES, go_wakes)
            // TASKS is task storage, which aya creates but does not wrap
            // (see bpf/task_storage.rs).
            .allow_unsupported_maps()
            .load(object.bytes())?;

        let logger = match aya_log::EbpfLogger::init(&mut ebpf) {
            Ok(logger) => Some(logger),
            Err(e) => {
                tracing::debug!("eBPF log channel unavailable: {e}");
                None
            }
        };

        let pids = match targets {
            Target::Pids(pids) => &pids[..],
            Target::All => &[],
        };
        let mut kernel = Self {
            windows: Windows::take(&mut ebpf, wakers)?,
            targets: TargetSet::take(&mut ebpf, pids, &config.discover.comms)?,
            in_flight: InFlight::take(&mut ebpf)?,
            unwind: UnwindTables::take(&mut ebpf)?,
            python: PythonTables::take(&mut ebpf)?,
            java: JavaTables::take(&mut ebpf)?,
            go: GoTables::take(&mut ebpf)?,
            thread_ctx: ThreadCtxTables::take(&mut ebpf)?,
            runtime_procs: RuntimeProcs::take(&mut ebpf)?,
            doorbell: Some(take_map(&mut ebpf, UNWIND_DOORBELL)?),
            logger,
            ebpf,
        };
        kernel.attach_all(config, object.kfuncs, user_stacks)?;
        // The first window starts once everything is attached.
        kernel.windows.start();
        Ok(kernel)
    }

    /// The program `name`, as the type it must have.
    fn program_mut<'a, P>(&'a mut self, name: &'static str) -> Result<&'a mut P, KernelError>
    where
        &'a mut P: TryFrom<&'a mut Program, Error = ProgramError>,
    {
        self.ebpf
            .program_mut(name)
            .ok_or(KernelError::MissingProgram(name))?
            .try_into()
            .map_err(|source| KernelError::ProgramKind { name, source })
    }

    /// Copies the programs' log records into tracing from now on, on the
    /// tokio runtime; without a log channel (the object was built without
    /// one, or the kernel refused it) there is nothing to copy.
    pub fn forward_logs(&mut self) {
        if let Some(logger) = self.logger.take() {
            ebpf_log::forward(logger);
        }
    }

    /// The walker's doorbell, registered with the tokio runtime (only the
    /// first call has it).
    ///
    /// # Errors
    /// When the map is not a ring buffer, or the runtime refuses it.
    pub fn doorbell(&mut self) -> Result<Option<Doorbell>, KernelError> {
        self.doorbell.take().map(Doorbell::new).transpose()
    }
}

// Each interface is its part's.

/// Whether the verifier refused a program for its task work (the kfunc
/// that schedules it, named in its last line), not for another cause.
fn refuses_task_work(error: &ProgramError) -> bool {
    verifier_lines(error)
        .last()
        .is_some_and(|line| line.contains("task_work"))
}

/// The verifier's last words on a refused program (its log's last lines
/// before the statistics), or the error itself without a log.
fn verifier_reason(error: &ProgramError) -> String {
    let lines = verifier_lines(error);
    lines[lines.len().saturating_sub(2)..].join("; ")
}

/// The lines of the verifier's log on a refused program before its
/// statistics, or the error itself when it has none.
fn verifier_lines(error: &ProgramError) -> Vec<String> {
    let ProgramError::LoadError {
        io_error,
        verifier_log,
    } = error
    else {
        return vec![error.to_string()];
    };
    let lines: Vec<String> = verifier_log
        .to_string()
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .take_while(|line| !line.starts_with("verification time"))
        .map(str::to_owned)
        .collect();
    if lines.is_empty() {
        vec![io_error.to_string()]
    } else {
        lines
    }
}

//! Attaching the loaded object's programs: the on-CPU sampler to every
//! online CPU, the BTF tracepoints, the hooks on the way back to user
//! space, and the goroutine wakers' uprobe.
use aya::{
    Btf,
    programs::{
        BtfTracePoint, PerfEvent, UProbe,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeScope},
    },
    util::online_cpus,
};

use super::{
    GO_READY, Kernel, OFF_CPU_PROGRAMS, ON_CPU_PROGRAM, RSEQ_UPDATE, SCHED_SWITCH, SCHED_WAKING,
    SYS_EXIT, UNWIND_PROGRAMS,
};
use crate::{
    bpf::error::KernelError,
    config::{Config, UserStacks},
};

impl Kernel {
    /// Loads and attaches the programs `config` asks for (`user_stacks`:
    /// how the off-CPU ones take user stacks; `task_work`: its kfuncs are
    /// linked).
    pub(super) fn attach_all(
        &mut self,
        config: &Config,
        task_work: bool,
        user_stacks: Option<UserStacks>,
    ) -> Result<(), KernelError> {
        let btf = Btf::from_sys_fs().map_err(KernelError::Btf)?;
        // The walking programs are verified before anything is attached:
        // that takes seconds on newer kernels, and the first window would
        // count the off-CPU time kept meanwhile, before it starts. The
        // off-CPU ones first, `sched_switch` first of all: a verifier that
        // refuses its task work has the object loaded again
        // (`Kernel::load`), and programs verified before it would be
        // verified twice (`sched_process_exit` alone takes 0.3 s on 6.18).
        if config.modes.off_cpu().is_some() {
            let mut off_cpu = OFF_CPU_PROGRAMS;
            off_cpu.sort_by_key(|&(name, _)| name != SCHED_SWITCH);
            self.load_tracepoints(&off_cpu, &btf)?;
        }
        if config.modes.on_cpu() {
            self.load_on_cpu()?;
        }
        self.attach_tracepoints(&UNWIND_PROGRAMS, &btf)?;
        if let Some(off_cpu) = config.modes.off_cpu() {
            self.attach_return_hooks(task_work, user_stacks.unwrap_or(off_cpu.user_stacks), &btf)?;
            self.attach_tracepoints(&OFF_CPU_PROGRAMS, &btf)?;
            if off_cpu.wakers {
                self.attach_tracepoints(&[SCHED_WAKING], &btf)?;
            }
        }
        if config.modes.on_cpu() {
            self.attach_on_cpu(config.sample_period_ns())?;
        }
        Ok(())
    }

    /// Loads the on-CPU sampler, to attach it later.
    pub(super) fn load_on_cpu(&mut self) -> Result<(), KernelError> {
        let name = ON_CPU_PROGRAM;
        let program: &mut PerfEvent = self.program_mut(name)?;
        program
            .load()
            .map_err(|source| KernelError::LoadProgram { name, source })
    }

    /// Attaches the on-CPU sampler ([`Self::load_on_cpu`]) to every online
    /// CPU.
    pub(super) fn attach_on_cpu(&mut self, sample_period_ns: u64) -> Result<(), KernelError> {
        let name = ON_CPU_PROGRAM;
        let program: &mut PerfEvent = self.program_mut(name)?;
        let cpus = online_cpus().map_err(|(path, source)| KernelError::Cpus { path, source })?;
        for cpu in cpus {
            program
                .attach(
                    PerfEventConfig::Software(SoftwareEvent::CpuClock),
                    PerfEventScope::AllProcessesOneCpu { cpu },
                    SamplePolicy::Period(sample_period_ns),
                    false,
                )
                .map_err(|source| KernelError::Attach { name, cpu, source })?;
        }
        Ok(())
    }

    /// Loads the BTF tracepoint programs, to attach them later.
    pub(super) fn load_tracepoints(
        &mut self,
        programs: &[(&'static str, &'static str)],
        btf: &Btf,
    ) -> Result<(), KernelError> {
        for &(name, tracepoint) in programs {
            self.load_tracepoint(name, tracepoint, btf)?;
        }
        Ok(())
    }

    /// Attaches the BTF tracepoint programs, loading those not loaded yet.
    pub(super) fn attach_tracepoints(
        &mut self,
        programs: &[(&'static str, &'static str)],
        btf: &Btf,
    ) -> Result<(), KernelError> {
        for &(name, tracepoint) in programs {
            let program = self.load_tracepoint(name, tracepoint, btf)?;
            program
                .attach()
                .map_err(|source| KernelError::AttachProgram { name, source })?;
        }
        Ok(())
    }

    /// The BTF tracepoint program `name` on `tracepoint`, loaded unless it
    /// was.
    fn load_tracepoint(
        &mut self,
        name: &'static str,
        tracepoint: &'static str,
        btf: &Btf,
    ) -> Result<&mut BtfTracePoint, KernelError> {
        let program: &mut BtfTracePoint = self.program_mut(name)?;
        if program.fd().is_err() {
            program
                .load(tracepoint, btf)
                .map_err(|source| KernelError::LoadProgram { name, source })?;
        }
        Ok(program)
    }

    /// With task work (`task_work`: its kfuncs are linked), no hook is
    /// needed on the way back to user space. Otherwise attaches
    /// `rseq_update`, and `sys_exit` if asked for or if the kernel has no
    /// `rseq_update` tracepoint (then with a warning: every system call
    /// pays for it).
    pub(super) fn attach_return_hooks(
        &mut self,
        task_work: bool,
        user_stacks: UserStacks,
        btf: &Btf,
    ) -> Result<(), KernelError> {
        if task_work {
            tracing::debug!("off-CPU: user stacks by task work on the way back to user space");
            return Ok(());
        }
        if user_stacks == UserStacks::TaskWork {
            tracing::info!(
                "off-CPU: this kernel has no BPF task work (Linux 6.18); user stacks are \
                 taken at rseq_update"
            );
        }
        let rseq = match self.attach_tracepoints(&[RSEQ_UPDATE], btf) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(
                    "off-CPU: cannot use the rseq_update tracepoint; taking user stacks \
                     at sys_exit instead, which slows every system call: {}",
                    crate::error_chain(&e)
                );
                false
            }
        };
        if user_stacks == UserStacks::SysExit || !rseq {
            self.attach_tracepoints(&[SYS_EXIT], btf)?;
        }
        Ok(())
    }

    /// Probes `runtime.ready` at file offset `offset` of the binary at
    /// `exe`, whose layout is `GO_BINARIES[index]` (the probe's cookie).
    /// Every process running it hits the probe; the program stops at once
    /// for one that is not a target.
    pub(super) fn attach_go_ready(
        &mut self,
        exe: &std::path::Path,
        offset: u64,
        index: u32,
    ) -> Result<(), KernelError> {
        let name = GO_READY;
        let program: &mut UProbe = self.program_mut(name)?;
        if program.fd().is_err() {
            program
                .load()
                .map_err(|source| KernelError::LoadProgram { name, source })?;
        }
        let point = UProbeAttachPoint {
            location: UProbeAttachLocation::AbsoluteOffset(offset),
            cookie: Some(u64::from(index)),
        };
        program
            .attach(point, exe, UProbeScope::AllProcesses)
            .map_err(|source| KernelError::AttachProgram { name, source })?;
        Ok(())
    }
}

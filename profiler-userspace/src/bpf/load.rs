//! Loading the eBPF object, setting its targets and attaching the on-CPU
//! sampler to every online CPU.
use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap, MapData},
    programs::{
        PerfEvent,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
    },
    util::online_cpus,
};
use profiler_common::{
    maps::{GLOBAL_TARGET_ALL, TARGETS},
    stats::STATS_LEN,
};

use super::KernelError;
use crate::config::Target;

/// The compiled eBPF object, built by build.rs from profiler-ebpf.
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/profiler-ebpf"));

const ON_CPU_PROGRAM: &str = "on_cpu_sample";

/// The loaded and attached programs and their maps.
pub struct Kernel {
    pub(super) ebpf: Ebpf,
    /// The slot the kernel writes to now.
    pub(super) active_slot: u32,
    /// Kernel counters as of the previous drain, to report deltas.
    pub(super) last_stats: [u64; STATS_LEN as usize],
    logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
}

impl Kernel {
    /// Loads the programs, fills the target set and starts sampling every
    /// online CPU once per `sample_period_ns` nanoseconds of CPU time.
    ///
    /// # Errors
    /// When the kernel refuses the object, a map or a perf event.
    pub fn load(target: &Target, sample_period_ns: u64) -> Result<Self, KernelError> {
        let target_all = u8::from(matches!(target, Target::All));
        let mut ebpf = EbpfLoader::new()
            .override_global(GLOBAL_TARGET_ALL, &target_all, true)
            .load(EBPF_OBJECT)?;

        let logger = match aya_log::EbpfLogger::init(&mut ebpf) {
            Ok(logger) => Some(logger),
            Err(e) => {
                tracing::debug!("eBPF log channel unavailable: {e}");
                None
            }
        };

        if let Target::Pids(pids) = target {
            let mut targets: HashMap<&mut MapData, u32, u8> =
                HashMap::try_from(ebpf.map_mut(TARGETS).ok_or(KernelError::Missing {
                    kind: "map",
                    name: TARGETS,
                })?)
                .map_err(KernelError::map(TARGETS))?;
            for &pid in pids {
                targets
                    .insert(pid, 1, 0)
                    .map_err(KernelError::map(TARGETS))?;
            }
        }

        let program: &mut PerfEvent = ebpf
            .program_mut(ON_CPU_PROGRAM)
            .ok_or(KernelError::Missing {
                kind: "program",
                name: ON_CPU_PROGRAM,
            })?
            .try_into()
            .map_err(|source| KernelError::Program {
                name: ON_CPU_PROGRAM,
                source,
            })?;
        program.load().map_err(|source| KernelError::Program {
            name: ON_CPU_PROGRAM,
            source,
        })?;
        let cpus = online_cpus().map_err(|(path, source)| KernelError::Cpus { path, source })?;
        for cpu in cpus {
            program
                .attach(
                    PerfEventConfig::Software(SoftwareEvent::CpuClock),
                    PerfEventScope::AllProcessesOneCpu { cpu },
                    SamplePolicy::Period(sample_period_ns),
                    false,
                )
                .map_err(|source| KernelError::Attach {
                    name: ON_CPU_PROGRAM,
                    cpu,
                    source,
                })?;
        }

        let mut kernel = Self {
            ebpf,
            active_slot: 0,
            last_stats: [0; STATS_LEN as usize],
            logger,
        };
        kernel.set_active_slot(0)?;
        Ok(kernel)
    }

    /// Takes the eBPF log channel, to be polled by the caller.
    pub fn take_logger(&mut self) -> Option<aya_log::EbpfLogger<&'static dyn log::Log>> {
        self.logger.take()
    }
}

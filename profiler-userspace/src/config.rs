//! The validated configuration the daemon runs with. Built by `cli.rs`;
//! nothing past it knows about command-line flags.
use std::{net::SocketAddr, path::PathBuf, time::Duration};

/// What to profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// These processes (tgids), all of their threads; with `--comm` or
    /// `--pid-file` the list may start empty.
    Pids(Vec<u32>),
    /// Every process on the system except the idle task.
    All,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub target: Target,
    /// Directory the pprof files are written to.
    pub output_dir: PathBuf,
    /// Length of one profile window.
    pub interval: Duration,
    /// Stop after this long; `None` runs until signalled.
    pub duration: Option<Duration>,
    /// On-CPU sampling frequency per CPU.
    pub frequency_hz: u64,
    /// Reads of each Go target's goroutines per second; `None`: no
    /// goroutine view.
    pub goroutine_hz: Option<u64>,
    /// Whether each goroutine's wait names the goroutine that ended it
    /// (`--goroutine-wakers`; only with the goroutine view).
    pub goroutine_wakers: bool,
    /// On-CPU sampling, off-CPU tracking, or both.
    pub modes: Modes,
    /// Number of newest profile files to keep.
    pub retain: usize,
    /// How user stacks are walked (`--unwind`, `--unwind-table-memory`).
    pub unwind: Unwind,
    /// Targets found by name or PID file, besides `--pid`.
    pub discover: Discover,
    /// Where function names come from besides the binaries themselves.
    pub symbols: Symbols,
    /// Where the HTTP endpoints listen (`--listen`); `None`: off.
    pub listen: Option<SocketAddr>,
    /// Backends the profiles are pushed to (`--push`); `None`: off.
    pub push: Option<Push>,
    /// The what-if estimate of each window (`--what-if`); `None`: off.
    pub what_if: Option<WhatIf>,
}

/// `--what-if FUNCTION:PERCENT`: each window estimates how much faster
/// threads would make progress if FUNCTION took PERCENT less time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WhatIf {
    pub function: String,
    /// The share of the function's time taken out, 1 to 99.
    pub faster_pct: u8,
}

impl WhatIf {
    /// Whether a frame's function is this one: the same name, or a name
    /// that ends in it after `::` or `.` (`Class::method`, Go's
    /// `main.work`, Java's `pkg.Class.method`, Python's `module.function`).
    #[must_use]
    pub fn matches(&self, function: &str) -> bool {
        function
            .strip_suffix(self.function.as_str())
            .is_some_and(|head| head.is_empty() || head.ends_with("::") || head.ends_with('.'))
    }
}

/// Pushing profiles to fleet backends (`--push` and its flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Push {
    /// Base URLs of the backends; each gets every push, with a spool of its
    /// own.
    pub endpoints: Vec<url::Url>,
    pub protocol: PushProtocol,
    /// How often a push is made, independent of the file windows.
    pub interval: Duration,
    /// Where pushes wait for their backend, one directory per endpoint.
    pub spool_dir: PathBuf,
    /// Most bytes one endpoint's spool holds; the oldest pushes go first.
    pub spool_max_bytes: u64,
    /// Time-out of one request.
    pub timeout: Duration,
    /// Extra root certificates (PEM) besides the system's.
    pub ca_file: Option<PathBuf>,
    /// A file holding `Bearer TOKEN` or `Basic USER:PASSWORD` (read at
    /// start; never on the command line).
    pub auth_file: Option<PathBuf>,
    /// Pyroscope's `X-Scope-OrgID` (multi-tenant servers).
    pub tenant: Option<String>,
}

/// The wire protocol of `--push`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushProtocol {
    /// Grafana Pyroscope's Connect API, `push.v1.PusherService/Push`.
    Pyroscope,
    /// Parca's `ProfileStoreService/WriteRaw`, through its HTTP gateway.
    Parca,
    /// OTLP profiles over HTTP, `ProfilesService/Export`.
    Otlp,
}

/// Where function names are looked for besides the binaries themselves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbols {
    /// Directories searched for separate debug files, by build id
    /// (`DIR/.build-id/xx/rest.debug`) and by debug link.
    pub debug_dirs: Vec<PathBuf>,
    /// Downloads from debuginfod servers; `None`: off.
    pub debuginfod: Option<DebuginfodServers>,
    /// Plain copies of debug files with compressed sections; `None`: off.
    pub debug_cache: Option<DebugCache>,
}

impl Default for Symbols {
    fn default() -> Self {
        Self {
            debug_dirs: vec![PathBuf::from(DEFAULT_DEBUG_DIR)],
            debuginfod: None,
            debug_cache: None,
        }
    }
}

/// Where distributions install debug files.
pub const DEFAULT_DEBUG_DIR: &str = "/usr/lib/debug";

/// Debug files downloaded from debuginfod servers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebuginfodServers {
    /// Server base URLs, tried in order.
    pub urls: Vec<String>,
    /// Where downloads are kept, one directory per build id.
    pub cache_dir: PathBuf,
    /// Time-out of one request (connecting, and the whole download).
    pub timeout: Duration,
    /// Largest debug file accepted.
    pub max_bytes: u64,
}

/// Where plain copies of debug files whose sections are compressed are
/// kept (`symbolize/inflated.rs`), and how much disk they may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebugCache {
    pub dir: PathBuf,
    pub max_bytes: u64,
}

/// Processes found by name or PID file (besides `--pid`), looked for again
/// while running.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discover {
    /// Process names (`comm`) to profile.
    pub comms: Vec<String>,
    /// Files holding a process id, such as a service's PID file.
    pub pid_files: Vec<PathBuf>,
    /// Keep running while no target is alive, and profile new matches.
    pub wait: bool,
}

/// How the kernel walks user stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unwind {
    /// By each binary's unwind table (built by the daemon), by frame
    /// pointer where a PC has none; `rows` is the table memory in 8-byte
    /// rows.
    Tables { rows: u32 },
    /// By frame pointers only, as `perf record -g` does: no tables built,
    /// no memory for them, and wrong callers wherever code has no frame
    /// pointer.
    FramePointers,
}

impl Unwind {
    /// Rows of the kernel's table array (one for frame pointers: the map
    /// cannot be empty).
    #[must_use]
    pub fn table_rows(self) -> u32 {
        match self {
            Self::Tables { rows } => rows,
            Self::FramePointers => 1,
        }
    }
}

/// What is profiled; never nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Modes {
    /// On-CPU samples only (`--no-off-cpu`).
    OnCpu,
    /// Off-CPU time only (`--no-on-cpu`).
    OffCpu(OffCpu),
    /// Both (the default).
    Both(OffCpu),
}

impl Modes {
    /// Whether on-CPU samples are taken.
    #[must_use]
    pub fn on_cpu(self) -> bool {
        !matches!(self, Self::OffCpu(_))
    }

    /// How off-CPU time is tracked, if it is.
    #[must_use]
    pub fn off_cpu(self) -> Option<OffCpu> {
        match self {
            Self::OnCpu => None,
            Self::OffCpu(off_cpu) | Self::Both(off_cpu) => Some(off_cpu),
        }
    }
}

/// How off-CPU intervals are sampled (see `profiler_common::off_cpu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffCpu {
    /// The rate `r` in nanoseconds; 0 keeps every interval.
    pub rate_ns: u64,
    /// Record kept short intervals with their raw duration (biased). Only
    /// for demonstrating the bias; a flag of test builds only (feature
    /// `test-knobs`, `cli/knobs.rs`).
    pub naive_weights: bool,
    /// The off-CPU programs return at once (test builds only; the bench's
    /// floor).
    pub dispatch_only: bool,
    /// Interval cells in use (fewer only in test builds).
    pub interval_cells: u32,
    /// Where the user stack of kept weight is taken.
    pub user_stacks: UserStacks,
    /// Whether blocked weight names its waker (`--wakers`).
    pub wakers: bool,
}

/// Where the user stack of kept off-CPU weight is taken: in the thread's
/// own context, on its way back to user space (see profiler-ebpf's
/// `off_cpu/mod.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserStacks {
    /// By BPF task work, scheduled only for kept intervals, where the
    /// kernel has it (Linux 6.18); else as [`Self::Rseq`]. The default.
    TaskWork,
    /// At `rseq_update` (threads without rseq: at their next switch-out).
    /// Flag `--off-cpu-no-task-work` of test builds: older kernels'
    /// behaviour.
    Rseq,
    /// At `rseq_update` and every system call's exit (`--off-cpu-sys-exit`:
    /// exact for threads without rseq on older kernels, at a cost to every
    /// system call on the machine).
    SysExit,
}

impl Config {
    /// Nanoseconds of CPU time one on-CPU sample stands for.
    #[must_use]
    pub fn sample_period_ns(&self) -> u64 {
        1_000_000_000 / self.frequency_hz
    }
}

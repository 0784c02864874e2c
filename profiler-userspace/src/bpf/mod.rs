//! The kernel side as seen from userspace: load and attach the eBPF
//! programs (`load.rs`), change their target set (`targets.rs`), then
//! drain their maps window by window (`drain.rs`), account the intervals
//! still open at a window's end (`in_flight.rs`, with the sampling rule's
//! random source in `rng.rs`),
//! find the scheduler fields the off-CPU programs read (`btf_fields.rs`),
//! probe the kernel for what the programs need (`features.rs`),
//! link its kfunc calls (`kfunc.rs`), serve the unwinder's maps
//! (`unwind_maps.rs`), the Python walk's (`python_maps.rs`), the Java
//! walk's (`java_maps.rs`), the Go labels' (`go_maps.rs`) and the thread
//! contexts' (`thread_ctx_maps.rs`), with which of them hold each process
//! (`runtime_procs.rs`), and copy the programs' log into tracing
//! (`ebpf_log.rs`). Only this module touches aya types.
//!
//! The rest of the daemon uses the kernel through narrow interfaces:
//! [`WindowMaps`], [`InFlightMaps`], [`TargetMaps`], [`UnwindMaps`],
//! [`PythonMaps`], [`JavaMaps`], [`GoMaps`] and [`ThreadCtxMaps`]. [`KernelMaps`] is all eight, as the daemon's window loop uses them.
//! [`Kernel`] implements each against the loaded programs; `in_memory.rs`
//! implements them in memory, for tests that run without root.
mod asleep;
mod batch;
mod btf_fields;
#[cfg(test)]
mod contract_tests;
mod doorbell;
mod drain;
mod ebpf_log;
mod error;
pub mod features;
mod go_maps;
mod handshake;
mod in_flight;
#[cfg(test)]
pub mod in_memory;
mod java_maps;
mod kfunc;
mod load;
#[cfg(test)]
mod process_seen_tests;
mod python_maps;
mod rng;
mod runtime_procs;
#[cfg(test)]
mod runtime_procs_tests;
#[cfg(test)]
mod stack_tests;
mod targets;
mod task_storage;
mod thread_attrs;
mod thread_ctx_maps;
mod tracked_thread;
mod unwind_maps;

pub use btf_fields::{BtfFieldError, KernelTypes};
pub use doorbell::{Doorbell, Rang};
pub use drain::{Drained, WindowMaps};
pub use error::KernelError;
pub use go_maps::{GoMaps, GoWakeLookup};
pub use in_flight::{InFlightMaps, InFlightStats};
pub use java_maps::JavaMaps;
pub use load::Kernel;
pub use python_maps::PythonMaps;
pub use rng::Rng;
pub use targets::TargetMaps;
pub use thread_ctx_maps::ThreadCtxMaps;
pub use unwind_maps::UnwindMaps;

/// Every map the daemon's window loop uses.
pub trait KernelMaps:
    WindowMaps
    + InFlightMaps
    + TargetMaps
    + UnwindMaps<Error = KernelError>
    + PythonMaps
    + JavaMaps
    + GoMaps
    + ThreadCtxMaps
{
}

impl<T> KernelMaps for T where
    T: WindowMaps
        + InFlightMaps
        + TargetMaps
        + UnwindMaps<Error = KernelError>
        + PythonMaps
        + JavaMaps
        + GoMaps
        + ThreadCtxMaps
{
}

//! The goroutine view: where a Go program's goroutines wait, read from
//! outside the process. A thread of its own reads each Go target's
//! goroutine list at a fixed rate with `process_vm_readv` (the target is
//! not stopped and pays nothing), unwinds every goroutine that is not
//! running from where it stopped, and counts the time each stack and wait
//! reason stands for. Its rows join the window with the kernel's at each
//! chunk's end.
//!
//! `runtime.rs` finds a binary's runtime facts (version, `allgs`,
//! offsets: `dwarf.rs`, or `layout.rs`'s table of known versions),
//! `memory.rs` reads the target, `process.rs` reads one process's
//! goroutines, `binaries.rs` keeps what each executable is,
//! `reader.rs` reads every Go target at each tick, and `sampler.rs` is its
//! thread.
mod binaries;
mod dwarf;
pub mod g;
pub mod layout;
pub mod memory;
pub mod process;
mod reader;
pub mod runtime;
pub mod sampler;

pub use reader::GoroutineStats;
pub use sampler::{GoroutineChunk, GoroutineSampler};

//! Types, map names and pure logic shared by the eBPF programs
//! (`profiler-ebpf`) and the daemon (`profiler-userspace`).
//!
//! Everything that crosses the kernel/user boundary is `#[repr(C)]` and
//! defined here once, so both sides agree on layout by construction.
#![no_std]
#[cfg(test)]
extern crate std;

pub mod bound;
pub mod frames;
pub mod go;
pub mod go_wake;
pub mod hash;
pub mod java;
pub mod maps;
pub mod off_cpu;
pub mod process;
pub mod python;
pub mod runtimes;
pub mod sample;
pub mod sched;
pub mod stack;
pub mod stats;
pub mod task;
pub mod thread_ctx;
pub mod unwind;
pub mod waker;

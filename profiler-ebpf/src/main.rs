//! Kernel side of the profiler: program entry points only.
//!
//! Each entry point forwards to the module that holds its logic; all maps
//! live in `maps.rs`.
#![no_std]
#![no_main]
// Atomic add on map values: BPF has no compare-and-swap, so core::sync's
// AtomicU64::fetch_add is not available on this target.
#![allow(internal_features)]
#![feature(core_intrinsics)]
// The verifier and the hot path both prefer straight-line code: helpers are
// small and meant to be inlined into the program that calls them.
#![expect(
    clippy::inline_always,
    reason = "eBPF helpers inline into their program"
)]

mod maps;
mod on_cpu;
mod stack;
mod target;

use aya_ebpf::{macros::perf_event, programs::PerfEventContext};

/// Runs on every cpu-clock tick on every CPU.
#[perf_event]
#[expect(
    clippy::needless_pass_by_value,
    reason = "the macro fixes the signature"
)]
pub fn on_cpu_sample(ctx: PerfEventContext) -> u32 {
    on_cpu::record(&ctx);
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";

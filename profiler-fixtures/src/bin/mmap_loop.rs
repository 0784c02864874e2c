//! Executable mappings in a loop: maps its own binary `PROT_READ |
//! PROT_EXEC` and unmaps it again, for the given seconds, as a loader does
//! for every library of every process it starts. Each such mmap is what a
//! profiler following mappings through the kernel's records (perf's
//! `PERF_RECORD_MMAP2`, with the build id) pays for: this loop measures
//! that cost per mapping, without the noise of whole processes.
//!
//! Protocol (see `run_protocol`): `ready pid=P`, then after "go"
//! `mmaps_per_sec=N`.
use std::{os::fd::AsRawFd as _, time::Instant};

use profiler_fixtures::{run_protocol, run_time_from_args};

/// Bytes mapped each time: the first pages, where the ELF headers and the
/// build id note are.
const LEN: usize = 64 << 10;

fn main() {
    let run_time = run_time_from_args();
    let exe = std::fs::File::open("/proc/self/exe").expect("open own binary");
    run_protocol("", || {
        let start = Instant::now();
        let mut mmaps: u32 = 0;
        while start.elapsed() < run_time {
            for _ in 0..1000 {
                // SAFETY: a fresh private read-only mapping of an open
                // file, unmapped at once; nothing reads through it.
                let addr = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        LEN,
                        libc::PROT_READ | libc::PROT_EXEC,
                        libc::MAP_PRIVATE,
                        exe.as_raw_fd(),
                        0,
                    )
                };
                assert_ne!(addr, libc::MAP_FAILED, "mmap");
                // SAFETY: the mapping just made, of that length.
                let rc = unsafe { libc::munmap(addr, LEN) };
                assert_eq!(rc, 0, "munmap");
            }
            mmaps += 1000;
        }
        let rate = f64::from(mmaps) / start.elapsed().as_secs_f64();
        format!("mmaps_per_sec={rate:.0}")
    });
}

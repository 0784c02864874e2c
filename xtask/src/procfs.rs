//! The `/proc` readers the bench and the soak share.
use std::fs;

use anyhow::Context as _;

/// utime + stime of `pid`, in clock ticks (100 per second).
pub fn cpu_ticks(pid: u32) -> anyhow::Result<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let fields: Vec<&str> = stat[stat.rfind(')').context("stat")? + 2..]
        .split_whitespace()
        .collect();
    Ok(fields[11].parse::<u64>()? + fields[12].parse::<u64>()?)
}

/// A numeric field of `/proc/<pid>/status`, e.g. `VmRSS` (in kB).
pub fn status_field(pid: u32, key: &str) -> anyhow::Result<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .strip_prefix(':')?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .with_context(|| format!("no {key} in /proc/{pid}/status"))
}

/// Starts `pid`'s peak RSS (`VmHWM`) over from its RSS now (`clear_refs`
/// 5), so that a later read is the peak since.
pub fn reset_peak_rss(pid: u32) -> anyhow::Result<()> {
    fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .with_context(|| format!("resetting the peak RSS of {pid}"))
}

/// Kernel memory of the BPF maps `pid` holds open, in bytes: the sum of
/// `memlock` over its map descriptors (`/proc/<pid>/fdinfo`). This is not
/// in its RSS unless it maps them.
pub fn bpf_map_bytes(pid: u32) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in fs::read_dir(format!("/proc/{pid}/fdinfo"))? {
        // A descriptor closed since the listing is not an error.
        let Ok(info) = fs::read_to_string(entry?.path()) else {
            continue;
        };
        if !info.lines().any(|l| l.starts_with("map_id:")) {
            continue;
        }
        total += info
            .lines()
            .find_map(|l| l.strip_prefix("memlock:")?.trim().parse::<u64>().ok())
            .context("a BPF map's fdinfo without memlock")?;
    }
    Ok(total)
}

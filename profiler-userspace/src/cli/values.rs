//! Flag values that are parsed the same way wherever they appear:
//! durations and sizes.
use std::time::Duration;

/// A duration as humantime reads it: `500ms`, `10s`, `1m`.
pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (expected e.g. 500ms, 10s, 1m)"))
}

/// Bytes with an optional binary suffix: `K`, `M`, `G` (KiB, MiB, GiB).
pub(super) fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("{s:?} is not a size (expected e.g. 32M, 1G)");
    let t = s
        .strip_suffix("iB")
        .or_else(|| s.strip_suffix('B'))
        .unwrap_or(s);
    let (digits, shift) = match t.as_bytes().last() {
        Some(b'K' | b'k') => (&t[..t.len() - 1], 10),
        Some(b'M' | b'm') => (&t[..t.len() - 1], 20),
        Some(b'G' | b'g') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    digits
        .parse::<u64>()
        .map_err(|_| bad())?
        .checked_mul(1 << shift)
        .ok_or_else(bad)
}

//! Flag values that are parsed the same way wherever they appear:
//! durations, sizes and `--what-if`'s function and share.
use std::time::Duration;

use crate::config::WhatIf;

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

/// `FUNCTION:PERCENT` of `--what-if`: a function name and the share of
/// its time taken out, 1 to 99.
pub(super) fn parse_what_if(s: &str) -> Result<WhatIf, String> {
    let bad = || format!("{s:?}: expected FUNCTION:PERCENT, e.g. c_compute:50 (1 to 99)");
    let (function, pct) = s.rsplit_once(':').ok_or_else(bad)?;
    let faster_pct: u8 = pct.trim_end_matches('%').parse().map_err(|_| bad())?;
    if function.is_empty() || !(1..=99).contains(&faster_pct) {
        return Err(bad());
    }
    Ok(WhatIf {
        function: function.to_owned(),
        faster_pct,
    })
}

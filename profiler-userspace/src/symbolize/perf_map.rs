//! A JIT's perf map (`/tmp/perf-PID.map`), read as perf reads it: one
//! `START SIZE name` per line, START and SIZE in hex with or without `0x`
//! (HotSpot's `jcmd PID Compiler.perfmap` writes `0x`, Node and
//! perf-map-agent do not), a malformed line skipped rather than the whole
//! map refused (blazesym's reader refuses maps in `0x` form).
//!
//! Where entries overlap (code freed and the address reused by a later
//! compilation), the later line wins: it describes the code there now.

/// The entries of one map, by start address.
#[derive(Debug, Default)]
pub(super) struct PerfMap {
    /// (start, end, line index, name), sorted by start.
    entries: Vec<(u64, u64, usize, String)>,
}

impl PerfMap {
    /// The map in `text`.
    pub fn parse(text: &str) -> Self {
        let mut entries: Vec<_> = text
            .lines()
            .enumerate()
            .filter_map(|(i, line)| {
                let (start, rest) = hex_field(line)?;
                let (size, name) = hex_field(rest)?;
                let name = name.trim_end();
                (!name.is_empty() && size > 0)
                    .then(|| (start, start.saturating_add(size), i, name.to_owned()))
            })
            .collect();
        entries.sort_unstable_by_key(|&(start, _, i, _)| (start, i));
        Self { entries }
    }

    /// The name of the code at `addr`: of the entries that hold it, the
    /// one written last.
    pub fn name(&self, addr: u64) -> Option<&str> {
        let after = self.entries.partition_point(|e| e.0 <= addr);
        self.entries[..after]
            .iter()
            .filter(|e| addr < e.1)
            .max_by_key(|e| e.2)
            .map(|e| e.3.as_str())
    }
}

/// A hex number (an optional `0x`) at the start of `text`, and what
/// follows its one separating space.
fn hex_field(text: &str) -> Option<(u64, &str)> {
    let text = text.trim_start();
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    let end = digits
        .find(|c: char| !c.is_ascii_hexdigit())
        .unwrap_or(digits.len());
    let value = u64::from_str_radix(&digits[..end], 16).ok()?;
    let rest = digits[end..].strip_prefix(' ')?;
    Some((value, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_name_their_code_and_bad_lines_are_skipped() {
        let map = PerfMap::parse(
            "7f00001000 40 LazyCompile:*main /app/main.js:3\n\
             0x0000007f00002000 0x20 void CryptoBench.crypt(java.lang.String)\n\
             not a line\n\
             7f00003000 zz broken size\n",
        );
        assert_eq!(
            map.name(0x7f_0000_1010),
            Some("LazyCompile:*main /app/main.js:3")
        );
        assert_eq!(
            map.name(0x7f_0000_201f),
            Some("void CryptoBench.crypt(java.lang.String)")
        );
        assert_eq!(map.name(0x7f_0000_2020), None);
        assert_eq!(map.name(0x7f_0000_3000), None);
    }

    #[test]
    fn the_later_of_overlapping_entries_names_the_code() {
        let map = PerfMap::parse("1000 100 old\n1080 10 newer\n");
        assert_eq!(map.name(0x1084), Some("newer"));
        assert_eq!(map.name(0x1000), Some("old"));
        let map = PerfMap::parse("1080 10 first\n1000 100 recompiled\n");
        assert_eq!(map.name(0x1084), Some("recompiled"));
    }
}

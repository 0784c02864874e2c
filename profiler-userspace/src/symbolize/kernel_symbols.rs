//! Kernel code that comes and goes: BPF programs (and the kernel's other
//! out-of-line code, such as BPF trampolines) as the kernel's
//! `PERF_RECORD_KSYMBOL` records tell of them, with their exact range.
//!
//! `/proc/kallsyms` is read once (`kallsyms.rs`), and it gives no sizes:
//! an address in a program loaded after that read was named after the
//! symbol below it, another program. perf does the same with the records
//! (`perf record` asks for them, `perf report` names BPF code by them).
//! Here a range a record registered names its addresses before kallsyms
//! does. Records of code unloaded are not needed: nothing runs there
//! until code is loaded there again, whose record replaces the name, and
//! samples taken before the unload keep the name of what they ran.
use std::{collections::BTreeMap, sync::Arc};

use crate::{profile::Line, sample::KernelSymbol};

impl KernelSymbol {
    fn end(&self) -> u64 {
        self.start.saturating_add(u64::from(self.len))
    }
}

/// The ranges the records told of, by start, with their end and name.
#[derive(Default)]
pub(super) struct KernelSymbols {
    ranges: BTreeMap<u64, (u64, Arc<[Line]>)>,
    /// The last record taken in.
    seq: u64,
}

impl KernelSymbols {
    /// Takes in those of `symbols` (oldest first) not taken in before, and
    /// returns them: a name cached in their ranges may be stale. A range
    /// replaces every range that starts within it, so there is at most
    /// one entry per range the kernel used, however often it is reused.
    pub fn apply<'a>(&mut self, symbols: &'a [KernelSymbol]) -> &'a [KernelSymbol] {
        let new = &symbols[symbols.partition_point(|s| s.seq <= self.seq)..];
        for symbol in new {
            self.seq = symbol.seq;
            let end = symbol.end().max(symbol.start + 1);
            let within: Vec<u64> = self
                .ranges
                .range(symbol.start..end)
                .map(|(&start, _)| start)
                .collect();
            for start in within {
                self.ranges.remove(&start);
            }
            let lines = Arc::from([Line {
                function: symbol.name.clone(),
                file: String::new(),
                line: 0,
            }]);
            self.ranges.insert(symbol.start, (end, lines));
        }
        new
    }

    /// The name of `addr` if a record's range holds it (else kallsyms
    /// names it).
    pub fn lines(&self, addr: u64) -> Option<Arc<[Line]>> {
        let (_, (end, lines)) = self.ranges.range(..=addr).next_back()?;
        (addr < *end).then(|| lines.clone())
    }

    /// Whether `addr` is in one of `symbols`' ranges.
    pub fn touches(symbols: &[KernelSymbol], addr: u64) -> bool {
        symbols.iter().any(|s| (s.start..s.end()).contains(&addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records as the rings number them, from `first_seq` on.
    fn records(symbols: &[(u64, u32, &str)], first_seq: u64) -> Vec<KernelSymbol> {
        (first_seq..)
            .zip(symbols)
            .map(|(seq, &(start, len, name))| KernelSymbol {
                seq,
                start,
                len,
                name: name.to_owned(),
            })
            .collect()
    }

    fn name(table: &KernelSymbols, addr: u64) -> Option<String> {
        table.lines(addr).map(|lines| lines[0].function.clone())
    }

    #[test]
    fn a_range_names_its_addresses_and_only_those() {
        let mut table = KernelSymbols::default();
        table.apply(&records(
            &[
                (0x1000, 0x100, "bpf_prog_aa_first"),
                (0x1200, 0x80, "bpf_prog_bb_second"),
            ],
            1,
        ));
        assert_eq!(name(&table, 0x1000).as_deref(), Some("bpf_prog_aa_first"));
        assert_eq!(name(&table, 0x10ff).as_deref(), Some("bpf_prog_aa_first"));
        // Between and past the ranges, and below them: kallsyms' to name.
        assert_eq!(name(&table, 0x1100), None);
        assert_eq!(name(&table, 0x1280), None);
        assert_eq!(name(&table, 0xfff), None);
        assert_eq!(name(&table, 0x1240).as_deref(), Some("bpf_prog_bb_second"));
    }

    #[test]
    fn code_loaded_where_other_code_was_takes_its_addresses() {
        let mut table = KernelSymbols::default();
        table.apply(&records(&[(0x1000, 0x100, "bpf_prog_aa_first")], 1));
        // In part of the same space, from a later start.
        table.apply(&records(&[(0x1040, 0x40, "bpf_prog_cc_third")], 2));
        assert_eq!(name(&table, 0x1050).as_deref(), Some("bpf_prog_cc_third"));
        assert_eq!(name(&table, 0x1010).as_deref(), Some("bpf_prog_aa_first"));
        assert_eq!(name(&table, 0x1090).as_deref(), None);
        // Over all of it: a single entry again.
        table.apply(&records(&[(0x1000, 0x200, "bpf_prog_dd_fourth")], 3));
        assert_eq!(table.ranges.len(), 1);
        assert_eq!(name(&table, 0x1050).as_deref(), Some("bpf_prog_dd_fourth"));
    }

    #[test]
    fn records_taken_in_before_are_not_taken_in_again() {
        let all = records(
            &[
                (0x1000, 0x100, "bpf_prog_aa_first"),
                (0x1000, 0x100, "bpf_prog_bb_second"),
            ],
            1,
        );
        let mut table = KernelSymbols::default();
        assert_eq!(table.apply(&all).len(), 2);
        // A window that ended before the second load, assembled after.
        assert!(table.apply(&all[..1]).is_empty());
        assert_eq!(name(&table, 0x1010).as_deref(), Some("bpf_prog_bb_second"));
        // One that overlaps: only its new record counts.
        let more = records(&[(0x1000, 0x100, "bpf_prog_ee_fifth")], 3);
        let overlapping = [all[1].clone(), more[0].clone()];
        assert_eq!(table.apply(&overlapping), &more[..]);
        assert_eq!(name(&table, 0x1010).as_deref(), Some("bpf_prog_ee_fifth"));
    }

    #[test]
    fn touched_addresses_are_those_in_a_new_range() {
        let new = records(&[(0x1000, 0x100, "bpf_prog_aa_first")], 1);
        assert!(KernelSymbols::touches(&new, 0x1000));
        assert!(KernelSymbols::touches(&new, 0x10ff));
        assert!(!KernelSymbols::touches(&new, 0x1100));
        assert!(!KernelSymbols::touches(&new, 0xfff));
    }
}

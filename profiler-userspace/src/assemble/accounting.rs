//! A window's counters (`Accounting`): the profile's comments and
//! `/metrics`, from the kernel's counters, the symbolizer's and the
//! critical path's.
use profiler_common::stats::Stat;

use super::{UserFrames, critical_path};
use crate::{
    process::roots::Unheld,
    symbolize::{SymbolizeStats, Unnamed},
    window::RawWindow,
};

/// A window's counters: the profile's comments, and `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct Accounting {
    pub symbolize: SymbolizeStats,
    /// Counts of this window alone, by name (`map_full_drops`, ...).
    pub counters: Vec<(&'static str, u64)>,
    /// Levels at the window's end (`debuginfod_pending`).
    pub gauges: Vec<(&'static str, u64)>,
    /// Blocked time on the critical path by where it ends (`--wakers`):
    /// the five largest are comments.
    pub critical_ends: std::collections::HashMap<String, u64>,
    /// `--what-if`'s estimates, as comment lines.
    pub what_if: Vec<String>,
}

impl Accounting {
    pub(super) fn of(
        raw: &RawWindow,
        symbolize: SymbolizeStats,
        user_frames: &UserFrames,
        unnamed_attrs: u64,
    ) -> Self {
        let mut counters: Vec<(&'static str, u64)> = Stat::ALL
            .iter()
            .map(|&stat| (stat.name(), raw.stat(stat)))
            .collect();
        let records = raw.record_stats();
        counters.extend([
            ("addresses_symbolized", symbolize.resolved),
            ("symbolization_failures", symbolize.failed),
            ("processes_unreadable", symbolize.processes_unreadable),
            ("processes_remembered", symbolize.processes_remembered),
            ("process_images_recorded", symbolize.images_recorded),
            ("process_images_ended", records.ended),
            ("process_images_dropped", records.dropped),
            ("processes_untracked", records.untracked),
            ("mapping_records_lost", records.lost),
            ("mapping_records_unreadable", records.unreadable),
            ("user_frames", user_frames.total),
            ("user_frames_resolved", user_frames.resolved),
            (Unnamed::ALL[0].counter(), user_frames.unnamed[0]),
            (Unnamed::ALL[1].counter(), user_frames.unnamed[1]),
            (Unnamed::ALL[2].counter(), user_frames.unnamed[2]),
            ("debug_files_opened", symbolize.debug_files),
        ]);
        counters.extend([
            ("process_contexts_read", symbolize.contexts.read),
            ("process_contexts_unreadable", symbolize.contexts.unreadable),
        ]);
        counters.extend(
            Unheld::ALL
                .iter()
                .map(|cause| (cause.counter(), symbolize.roots_unheld[cause.index()])),
        );
        let caches = symbolize.caches;
        counters.extend([
            ("symbol_binaries_evicted", caches.binaries_evicted),
            ("kernel_addresses_evicted", caches.kernel_addresses_evicted),
        ]);
        let mut gauges = vec![
            ("symbol_binaries_cached", caches.binaries),
            ("symbol_processes_cached", caches.processes),
            ("kernel_addresses_cached", caches.kernel_addresses),
        ];
        if let Some((debuginfod, pending)) = symbolize.debuginfod {
            counters.extend([
                ("debuginfod_fetched", debuginfod.fetched),
                ("debuginfod_missing", debuginfod.missing),
                ("debuginfod_failed", debuginfod.failed),
                ("debuginfod_bytes", debuginfod.bytes),
                ("debuginfod_fetch_ms", debuginfod.fetch_ms),
            ]);
            gauges.push(("debuginfod_pending", pending));
        }
        counters.extend([
            ("off_cpu_in_flight_tracked", raw.in_flight().tracked),
            ("off_cpu_in_flight_untracked", raw.in_flight().untracked),
            ("early_drains", raw.early_drains()),
        ]);
        counters.extend(raw.runtimes().counters());
        gauges.extend(raw.runtimes().levels());
        counters.push(("thread_ctx_attrs_unnamed", unnamed_attrs));
        counters.push(("unknown_entries", raw.unknown_entries()));
        Self {
            symbolize,
            counters,
            gauges,
            critical_ends: std::collections::HashMap::new(),
            what_if: Vec::new(),
        }
    }

    /// Adds a later part of the same window: counters add up, levels are
    /// the later part's.
    pub fn absorb(&mut self, later: Accounting) {
        for (name, value) in later.counters {
            match self.counters.iter_mut().find(|(n, _)| *n == name) {
                Some((_, total)) => *total += value,
                None => self.counters.push((name, value)),
            }
        }
        for (name, value) in later.gauges {
            match self.gauges.iter_mut().find(|(n, _)| *n == name) {
                Some((_, level)) => *level = value,
                None => self.gauges.push((name, value)),
            }
        }
        self.symbolize.resolved += later.symbolize.resolved;
        self.symbolize.failed += later.symbolize.failed;
        for (end, ns) in later.critical_ends {
            *self.critical_ends.entry(end).or_default() += ns;
        }
        // An estimate is of a part's whole wait graph: the later part's
        // stands (parts are rare: a map filled before the window's end).
        if !later.what_if.is_empty() {
            self.what_if = later.what_if;
        }
    }

    /// The critical path's five largest ends, (end, ns), the largest first.
    #[must_use]
    pub fn critical_top(&self) -> Vec<(&str, u64)> {
        critical_path::top(&self.critical_ends)
    }

    /// `name=value` lines, counters then gauges (`unknown_entries` only
    /// when there were any), then the critical path's five largest ends
    /// (`critical_path_top_N=END NS`) and the what-if estimates.
    #[must_use]
    pub fn comments(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .counters
            .iter()
            .chain(&self.gauges)
            .filter(|&&(name, value)| name != "unknown_entries" || value > 0)
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        lines.extend(critical_path::top_ends(&self.critical_ends));
        lines.extend(self.what_if.iter().cloned());
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_of_a_window_add_their_counters_and_keep_the_last_levels() {
        let part = |lost, pending| Accounting {
            counters: vec![("lost_samples", lost)],
            gauges: vec![("debuginfod_pending", pending)],
            ..Accounting::default()
        };
        let mut window = part(3, 2);
        window.absorb(part(4, 0));
        assert_eq!(
            window.comments(),
            ["lost_samples=7", "debuginfod_pending=0"]
        );
    }
}

//! One window, from what the kernel recorded to a symbolized [`Profile`].
use std::time::SystemTime;

use profiler_common::stats::Stat;

use crate::{
    bpf::RawWindow,
    profile::{Profile, Sample},
    symbolize::{SymbolizeStats, Symbolizer},
};

/// When a window began and how long it lasted.
#[derive(Clone, Copy, Debug)]
pub struct WindowTimes {
    pub start: SystemTime,
    pub duration_ns: u64,
}

/// Symbolizes `raw` and assembles the window's profile, with its
/// accounting in the comments.
pub fn assemble(
    raw: &RawWindow,
    symbolizer: &mut Symbolizer,
    times: WindowTimes,
    period_ns: u64,
) -> (Profile, SymbolizeStats) {
    let sym_stats = symbolizer.prepare(raw);
    let samples = raw
        .samples
        .iter()
        .map(|s| {
            let mut stack = symbolizer.kernel_locations(&s.kernel_stack);
            stack.extend(symbolizer.user_locations(s.pid, &s.user_stack));
            Sample {
                pid: s.pid,
                tid: s.tid,
                comm: symbolizer.process_name(s.pid),
                thread: s.thread.clone(),
                state: s.state,
                stack,
                samples: s.samples,
                off_cpu_ns: s.off_cpu_ns,
                off_cpu_count: s.off_cpu_count,
            }
        })
        .collect();

    let mut comments: Vec<String> = Stat::ALL
        .iter()
        .map(|&stat| format!("{}={}", stat.name(), raw.stat(stat)))
        .collect();
    comments.push(format!("addresses_symbolized={}", sym_stats.resolved));
    comments.push(format!("symbolization_failures={}", sym_stats.failed));
    comments.push(format!(
        "processes_unreadable={}",
        sym_stats.processes_unreadable
    ));
    comments.push(format!(
        "off_cpu_in_flight_tracked={}",
        raw.in_flight.tracked
    ));
    comments.push(format!(
        "off_cpu_in_flight_untracked={}",
        raw.in_flight.untracked
    ));
    if raw.unknown_entries > 0 {
        comments.push(format!("unknown_entries={}", raw.unknown_entries));
    }

    let profile = Profile {
        start: times.start,
        duration_ns: times.duration_ns,
        period_ns,
        samples,
        comments,
    };
    (profile, sym_stats)
}

//! One window, from its raw rows to a symbolized [`Profile`]: each stack
//! symbolized, the weight the kernel could not store as a visible sample,
//! and the window's counters ([`Accounting`]) as the profile's comments.
use std::{sync::Arc, time::SystemTime};

mod accounting;
mod critical_path;
#[cfg(test)]
mod test_rows;
mod wakers;
mod what_if;

pub use accounting::Accounting;
use profiler_common::{sample::ThreadState, stats::Stat};

use crate::{
    config::WhatIf,
    profile::{Location, Profile, Sample, View},
    sample::{RowLabels, with_java_frames_label, with_labels},
    symbolize::{Symbolizer, Unnamed},
    window::RawWindow,
};

/// Name of the frame that carries weight the kernel counted but could not
/// store (its samples map was full), so totals never under-report silently.
pub const LOST_FRAME: &str = "[lost: samples map full]";

/// The weight the kernel dropped on a full map, as one visible sample.
fn lost_sample(raw: &RawWindow) -> Option<Sample> {
    let (samples, off_cpu_ns, off_cpu_count) = (
        raw.stat(Stat::LostSamples),
        raw.stat(Stat::LostOffCpuNs),
        raw.stat(Stat::LostOffCpuCount),
    );
    (samples | off_cpu_ns | off_cpu_count != 0).then(|| Sample {
        pid: 0,
        tid: 0,
        comm: Arc::from("[lost]"),
        thread: "[lost]".to_owned(),
        placement: Arc::default(),
        state: ThreadState::Unknown,
        stack: vec![Location::marker(LOST_FRAME.to_owned())],
        samples,
        off_cpu_ns,
        off_cpu_count,
        labels: None,
        runtime_ns: 0,
        waker_ns: 0,
        critical_ns: 0,
        goroutine_waker_ns: 0,
        off_cpu_in_wall: true,
    })
}

/// User frames of a window's stacks (each stack counted once, whatever its
/// weight), and how many of them resolved to a function.
#[derive(Default)]
struct UserFrames {
    total: u64,
    resolved: u64,
    /// Those that did not, by [`Unnamed`] cause (in `Unnamed::ALL` order).
    unnamed: [u64; 3],
}

impl UserFrames {
    fn count(&mut self, symbolizer: &Symbolizer, locations: &[Location]) {
        for location in locations.iter().filter(|l| l.address != 0) {
            self.total += 1;
            if location.lines.is_empty() {
                let cause = symbolizer.unnamed(location);
                let i = Unnamed::ALL.iter().position(|&c| c == cause).unwrap_or(0);
                self.unnamed[i] += 1;
            } else {
                self.resolved += 1;
            }
        }
    }
}

/// The name of `sample`'s process, as read from `/proc` or the kernel's
/// records; for a process that neither named (it lived between two reads,
/// and no record told of it: a lost ring record, a fork before the rings
/// opened), its thread's name, which the kernel recorded with the sample
/// (as `perf report` names rows), so that no row goes without a name.
fn process_name(symbolizer: &Symbolizer, sample: &crate::sample::RawSample) -> Arc<str> {
    let name = symbolizer.process_name(sample.pid);
    if name.is_empty() {
        Arc::from(sample.thread.as_str())
    } else {
        name
    }
}

/// `sample`'s labels: the runtime's and the kernel's, whether its Java
/// frames are exact, its process's OpenTelemetry resource, and its thread
/// context record's attributes, named by the process's key map (those of
/// an index it does not name counted in `unnamed_attrs`).
fn labels(
    symbolizer: &Symbolizer,
    sample: &crate::sample::RawSample,
    unnamed_attrs: &mut u64,
) -> Option<Arc<RowLabels>> {
    let mut labels = sample.labels.clone();
    if let Some(approximate) = symbolizer.java_approximate(sample.pid, &sample.user_stack) {
        labels = Some(with_java_frames_label(labels, approximate));
    }
    let context = symbolizer.context(sample.pid);
    if let Some(context) = &context {
        labels = Some(with_labels(labels, &context.resource));
    }
    if let Some(values) = &sample.thread_attrs {
        let context = context.unwrap_or_default();
        labels = Some(with_labels(
            labels,
            &context.attr_labels(values, unnamed_attrs),
        ));
    }
    labels
}

/// When a window began and how long it lasted.
#[derive(Clone, Copy, Debug)]
pub struct WindowTimes {
    pub start: SystemTime,
    pub duration_ns: u64,
}

/// Symbolizes `raw` and assembles the window's profile, with its
/// accounting in the comments. `view` picks the sample type readers show
/// first; which rows `raw` holds is the caller's choice. `what_if` adds
/// its estimates to the comments.
pub fn assemble(
    raw: &RawWindow,
    symbolizer: &mut Symbolizer,
    times: WindowTimes,
    period_ns: u64,
    view: View,
    what_if: Option<&WhatIf>,
) -> (Profile, Accounting) {
    symbolizer.remember_python(raw.python_codes());
    symbolizer.remember_java(raw.java_names());
    let waker_rows = wakers::waker_rows(raw.samples());
    let sym_stats = symbolizer.prepare(
        raw.samples().iter().chain(&waker_rows),
        raw.processes(),
        raw.recorded(),
        raw.kernel_symbols(),
    );
    let mut user_frames = UserFrames::default();
    let mut unnamed_attrs = 0;
    let mut samples: Vec<Sample> = Vec::with_capacity(raw.samples().len());
    let mut waits = critical_path::Waits::default();
    for s in raw.samples() {
        let mut stack = symbolizer.kernel_locations(&s.kernel_stack);
        let user = symbolizer.user_locations(s.pid, &s.user_stack);
        // A goroutine's wait with its waker: the wait's rows were counted
        // as they were read.
        let goroutine_wait = wakers::is_goroutine_wait(s);
        if !goroutine_wait {
            user_frames.count(symbolizer, &user);
        }
        stack.extend(user);
        let row = Sample {
            pid: s.pid,
            tid: s.tid,
            comm: process_name(symbolizer, s),
            placement: symbolizer.placement(s.pid),
            thread: s.thread.clone(),
            state: s.state,
            stack,
            samples: s.samples,
            off_cpu_ns: s.off_cpu_ns,
            off_cpu_count: s.off_cpu_count,
            labels: labels(symbolizer, s, &mut unnamed_attrs),
            runtime_ns: s.runtime_ns,
            waker_ns: 0,
            critical_ns: 0,
            goroutine_waker_ns: 0,
            off_cpu_in_wall: !raw.runtimes().wall_pids.contains(&s.pid),
        };
        let twin = wakers::twin(symbolizer, s, &row);
        if goroutine_wait {
            if let Some((twin, waited_on)) = twin {
                waits.goroutines.push((row, waited_on));
                samples.push(twin);
            }
            continue;
        }
        samples.push(row);
        if let Some((twin, waited_on)) = twin {
            waits.threads.push((samples.len() - 1, waited_on));
            samples.push(twin);
        }
    }
    samples.extend(lost_sample(raw));
    let threads = critical_path::thread_times(&samples, &waits, period_ns);
    let chains = critical_path::critical_path(&samples, &waits, &threads);
    let what_if = what_if
        .map(|w| what_if::estimates(&samples, &threads, w))
        .unwrap_or_default();
    samples.extend(chains.rows);

    let mut accounting = Accounting::of(raw, sym_stats, &user_frames, unnamed_attrs);
    if !waits.is_empty() {
        accounting.counters.extend([
            ("critical_path_cycles", chains.cycles),
            ("critical_path_too_deep", chains.too_deep),
        ]);
        accounting.critical_ends = chains.by_end;
    }
    accounting.what_if = what_if;
    let comments = accounting.comments();
    let profile = Profile {
        view,
        start: times.start,
        duration_ns: times.duration_ns,
        period_ns,
        samples,
        comments,
    };
    (profile, accounting)
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    /// `raw` assembled by a fresh symbolizer, 10 ns a sample, no what-if.
    fn assemble_plain(raw: &RawWindow) -> Profile {
        let times = WindowTimes {
            start: UNIX_EPOCH,
            duration_ns: 1,
        };
        assemble(raw, &mut Symbolizer::default(), times, 10, View::Wall, None).0
    }

    #[test]
    fn weight_lost_on_a_full_map_shows_as_a_frame() {
        let raw = RawWindow::default()
            .with_stat(Stat::LostSamples, 3)
            .with_stat(Stat::LostOffCpuNs, 5_000_000)
            .with_stat(Stat::LostOffCpuCount, 2_000);
        let profile = assemble_plain(&raw);
        let lost = &profile.samples[0];
        assert_eq!(lost.stack[0].lines[0].function, LOST_FRAME);
        assert_eq!(
            (lost.samples, lost.off_cpu_ns, lost.off_cpu_count),
            (3, 5_000_000, 2_000)
        );
        assert!(profile.comments.contains(&"lost_samples=3".to_owned()));
    }

    #[test]
    fn a_process_never_read_is_named_by_its_thread() {
        let sample = |pid: u32| crate::sample::RawSample {
            pid,
            tid: pid,
            thread: "watch.sh".to_owned(),
            state: ThreadState::Sleeping,
            user_stack: crate::sample::Stack::Absent,
            kernel_stack: crate::sample::Stack::Absent,
            samples: 0,
            off_cpu_ns: 10,
            off_cpu_count: 1,
            labels: None,
            runtime_ns: 0,
            label_set: None,
            thread_attrs: None,
            woken_by: None,
        };
        // Above the kernel's largest pid_max (2^22): never a process.
        let raw = RawWindow::of_samples(vec![sample(u32::MAX - 1), sample(std::process::id())]);
        let profile = assemble_plain(&raw);
        let names: Vec<&str> = profile.samples.iter().map(|s| &*s.comm).collect();
        let own = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert_eq!(names, ["watch.sh", own.trim_end()]);
    }

    #[test]
    fn nothing_lost_adds_nothing() {
        let profile = assemble_plain(&RawWindow::default());
        assert!(profile.samples.is_empty());
    }
}

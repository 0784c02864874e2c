//! Windows drained in several chunks: the kernel maps are drained whenever
//! an on-demand profile starts or ends, or the maps fill up, and each chunk
//! is added to every window and request it belongs to.
use std::collections::HashMap;

use profiler_common::sample::ThreadState;

use super::chunk::RawWindow;
use crate::sample::{RawSample, RowLabels, Stack, ThreadAttrValues, WokenBy};

/// What makes two entries the same row: the kernel's own key.
#[derive(PartialEq, Eq, Hash)]
struct Key<'a> {
    pid: u32,
    tid: u32,
    thread: &'a str,
    state: ThreadState,
    user_stack: &'a Stack,
    kernel_stack: &'a Stack,
    labels: Option<&'a RowLabels>,
    thread_attrs: Option<&'a ThreadAttrValues>,
    woken_by: Option<&'a WokenBy>,
}

impl<'a> Key<'a> {
    fn of(sample: &'a RawSample) -> Self {
        Self {
            pid: sample.pid,
            tid: sample.tid,
            thread: &sample.thread,
            state: sample.state,
            user_stack: &sample.user_stack,
            kernel_stack: &sample.kernel_stack,
            labels: sample.labels.as_deref(),
            thread_attrs: sample.thread_attrs.as_deref(),
            woken_by: sample.woken_by.as_ref(),
        }
    }
}

impl RawWindow {
    /// Adds `chunk` to this window: entries with the same key are summed,
    /// counters are added.
    pub fn absorb(&mut self, chunk: &RawWindow) {
        let mut merged = Vec::with_capacity(self.samples.len() + chunk.samples.len());
        {
            let mut index: HashMap<Key<'_>, usize> = HashMap::new();
            for sample in self.samples.iter().chain(&chunk.samples) {
                if let Some(&i) = index.get(&Key::of(sample)) {
                    add(&mut merged[i], sample);
                } else {
                    index.insert(Key::of(sample), merged.len());
                    merged.push(sample.clone());
                }
            }
        }
        self.samples = merged;
        for (total, part) in self.stats.iter_mut().zip(chunk.stats.0) {
            *total += part;
        }
        self.unknown_entries += chunk.unknown_entries;
        self.in_flight.tracked += chunk.in_flight.tracked;
        self.in_flight.untracked += chunk.in_flight.untracked;
        self.early_drains += chunk.early_drains;
        self.processes.extend(chunk.processes.iter().cloned());
        self.recorded.extend(chunk.recorded.iter().cloned());
        self.python_codes.extend(chunk.python_codes.iter().cloned());
        self.java_names.extend(chunk.java_names.iter().cloned());
        self.kernel_symbols
            .extend(chunk.kernel_symbols.iter().cloned());
        self.record_stats.add(&chunk.record_stats);
        self.runtimes.add(&chunk.runtimes);
    }
}

fn add(total: &mut RawSample, part: &RawSample) {
    total.samples += part.samples;
    total.off_cpu_ns += part.off_cpu_ns;
    total.off_cpu_count += part.off_cpu_count;
    total.runtime_ns += part.runtime_ns;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use profiler_common::stats::Stat;

    use super::*;

    fn entry(tid: u32, frames: &[u64], samples: u64, off_cpu_ns: u64) -> RawSample {
        RawSample {
            pid: 1,
            tid,
            thread: "t".to_owned(),
            state: if samples > 0 {
                ThreadState::Running
            } else {
                ThreadState::Sleeping
            },
            user_stack: Stack::Frames(Arc::from(frames)),
            kernel_stack: Stack::Absent,
            samples,
            off_cpu_ns,
            off_cpu_count: off_cpu_ns / 100,
            labels: None,
            runtime_ns: 0,
            label_set: None,
            thread_attrs: None,
            woken_by: None,
        }
    }

    #[test]
    fn same_rows_are_summed_and_others_kept() {
        let mut window = RawWindow {
            samples: vec![entry(1, &[1, 2], 3, 0), entry(2, &[1, 2], 0, 500)],
            ..RawWindow::default()
        };
        window.stats[Stat::OnCpuSamples as usize] = 3;
        let mut chunk = RawWindow {
            samples: vec![
                entry(1, &[1, 2], 4, 0),
                entry(1, &[1, 3], 1, 0),
                entry(2, &[1, 2], 0, 700),
            ],
            ..RawWindow::default()
        };
        chunk.stats[Stat::OnCpuSamples as usize] = 5;
        chunk.unknown_entries = 1;
        window.absorb(&chunk);

        assert_eq!(window.samples.len(), 3);
        assert_eq!(window.samples[0].samples, 7);
        assert_eq!(
            (
                window.samples[1].off_cpu_ns,
                window.samples[1].off_cpu_count
            ),
            (1_200, 12)
        );
        assert_eq!(
            window.samples[2].user_stack,
            Stack::Frames(Arc::from(&[1, 3][..]))
        );
        assert_eq!(window.stat(Stat::OnCpuSamples), 8);
        assert_eq!(window.unknown_entries, 1);
    }

    #[test]
    fn absorbing_into_an_empty_window_copies_the_chunk() {
        let chunk = RawWindow {
            samples: vec![entry(1, &[9], 2, 0)],
            ..RawWindow::default()
        };
        let mut window = RawWindow::default();
        window.absorb(&chunk);
        assert_eq!(window.samples.len(), 1);
        assert_eq!(window.samples[0].samples, 2);
    }
}

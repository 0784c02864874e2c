//! A symbolized window: what the pprof encoder turns into bytes. Plain data,
//! independent of both the kernel and the pprof wire format.
use std::{sync::Arc, time::SystemTime};

use profiler_common::sample::ThreadState;

use crate::{
    process::{cgroup::Placement, maps::FileId},
    sample::RowLabels,
};

/// A mapped object a location belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Mapping {
    pub start: u64,
    pub limit: u64,
    pub file_offset: u64,
    /// Path of the file, or a pseudo name such as `[kernel.kallsyms]`.
    pub file: Arc<str>,
    /// Hex build id, empty when unknown.
    pub build_id: Arc<str>,
    /// For a file without a build id, what the symbolizer knows it by
    /// (neither is written out): its digest (`process/files.rs`: its size
    /// and both ends), the same for an image's file through every
    /// container's mount, where it was read while the process lived;
    /// else its device and inode as mapped. Either tells apart files at
    /// one path: two containers' `/app`, a Go program deployed anew by
    /// rename.
    pub digest: Option<u128>,
    pub file_id: Option<FileId>,
}

/// One source-level frame.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(clippy::struct_field_names, reason = "pprof's own name: Line.line")]
pub struct Line {
    /// Demangled function name.
    pub function: String,
    /// Source file, empty when unknown.
    pub file: String,
    /// Line number, 0 when unknown.
    pub line: u32,
}

/// One instruction address and the frames it stands for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location {
    pub mapping: Option<Arc<Mapping>>,
    /// The runtime address as captured (0 for synthetic markers).
    pub address: u64,
    /// Innermost inlined function first, the function that contains the
    /// address last; empty when the address did not resolve.
    pub lines: Arc<[Line]>,
}

impl Location {
    /// A location with no address, standing for weight whose stack is
    /// unknown, e.g. `[lost user stack: ...]`.
    #[must_use]
    pub fn marker(name: String) -> Self {
        Self {
            mapping: None,
            address: 0,
            lines: Arc::new([Line {
                function: name,
                file: String::new(),
                line: 0,
            }]),
        }
    }
}

/// One row of the profile.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Sample {
    pub pid: u32,
    pub tid: u32,
    /// Name of the process.
    pub comm: Arc<str>,
    /// Name of the thread.
    pub thread: String,
    /// The process's cgroup, container and systemd unit.
    pub placement: Arc<Placement>,
    pub state: ThreadState,
    /// Leaf first: kernel frames, then user frames.
    pub stack: Vec<Location>,
    /// On-CPU samples.
    pub samples: u64,
    /// Debiased off-CPU nanoseconds.
    pub off_cpu_ns: u64,
    /// Debiased off-CPU events, in `off_cpu::COUNT_SCALE` units.
    pub off_cpu_count: u64,
    /// What a language runtime says of the row (a goroutine's id, state
    /// and wait reason).
    pub labels: Option<Arc<RowLabels>>,
    /// Nanoseconds a runtime's own unit (a goroutine) spent not running.
    pub runtime_ns: u64,
    /// Debiased blocked nanoseconds of a row whose stack is the blocked
    /// one with its waker's above it (`off_cpu_wakers`, `--wakers`): the
    /// same time as a row of `off_cpu_ns`, drawn another way, so it counts
    /// in no other weight.
    pub waker_ns: u64,
    /// Debiased blocked nanoseconds of a row whose stack is what the
    /// blocked thread ultimately waited for, its chain of wakers and its
    /// blocked stack (`critical_path`, `--wakers`): counts in no other
    /// weight either.
    pub critical_ns: u64,
    /// Nanoseconds a goroutine waited, on a row whose stack is its parked
    /// one with the stack of the goroutine that woke it above it
    /// (`goroutine_wakers`, `--goroutine-wakers`): time of the `goroutine`
    /// type again, drawn another way, so it counts in no other weight.
    pub goroutine_waker_ns: u64,
    /// Whether `off_cpu_ns` counts in `wall`: not for the threads of a
    /// process whose runtime's units were read (a Go process's goroutines),
    /// whose `wall` is its units' time (a thread parked in the scheduler
    /// is no goroutine's wait).
    pub off_cpu_in_wall: bool,
}

/// Which weight a profile is about: the sample type readers show first,
/// and which rows it holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum View {
    /// Every row; on-CPU plus off-CPU time (the periodic files).
    #[default]
    Wall,
    /// On-CPU rows only (`/debug/pprof/profile`).
    Cpu,
    /// Off-CPU rows only (`/debug/pprof/offcpu`).
    OffCpu,
}

impl View {
    /// Whether a row with this weight belongs in the view.
    #[must_use]
    pub fn shows(self, on_cpu_samples: u64, off_cpu_ns: u64, off_cpu_count: u64) -> bool {
        match self {
            Self::Wall => true,
            Self::Cpu => on_cpu_samples != 0,
            Self::OffCpu => off_cpu_ns != 0 || off_cpu_count != 0,
        }
    }
}

/// A whole window.
#[derive(Clone, Debug)]
pub struct Profile {
    /// The weight readers show by default.
    pub view: View,
    pub start: SystemTime,
    pub duration_ns: u64,
    /// CPU nanoseconds one on-CPU sample stands for.
    pub period_ns: u64,
    pub samples: Vec<Sample>,
    /// Accounting lines: counters, losses, failures.
    pub comments: Vec<String>,
}

impl Sample {
    /// What identifies a row: everything but its weights.
    fn key(&self) -> SampleKey<'_> {
        (
            (self.pid, self.tid),
            &self.comm,
            &self.thread,
            &self.placement,
            self.state,
            &self.stack,
            (self.labels.as_deref(), self.off_cpu_in_wall),
        )
    }

    /// Whether the row belongs in `view`: a waker or critical-path row in
    /// the off-CPU one.
    #[must_use]
    pub fn in_view(&self, view: View) -> bool {
        (view == View::OffCpu && (self.waker_ns != 0 || self.critical_ns != 0))
            || view.shows(self.samples, self.off_cpu_ns, self.off_cpu_count)
    }

    /// Wall-clock nanoseconds: on-CPU time (`period_ns` per sample),
    /// off-CPU time unless a runtime's units cover it, and those units'
    /// time.
    #[must_use]
    pub fn wall_ns(&self, period_ns: u64) -> u64 {
        let off_cpu = if self.off_cpu_in_wall {
            self.off_cpu_ns
        } else {
            0
        };
        self.samples
            .saturating_mul(period_ns)
            .saturating_add(off_cpu)
            .saturating_add(self.runtime_ns)
    }
}

type SampleKey<'a> = (
    (u32, u32),
    &'a Arc<str>,
    &'a String,
    &'a Arc<Placement>,
    ThreadState,
    &'a Vec<Location>,
    (Option<&'a RowLabels>, bool),
);

/// Adds `more` rows to `rows`, summing the weights of rows that are the
/// same but for them.
pub fn merge_samples(rows: &mut Vec<Sample>, more: Vec<Sample>) {
    use std::hash::BuildHasher as _;
    if rows.is_empty() {
        *rows = more;
        return;
    }
    let hasher = std::collections::hash_map::RandomState::new();
    let mut index: std::collections::HashMap<u64, Vec<usize>> =
        std::collections::HashMap::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        index.entry(hasher.hash_one(row.key())).or_default().push(i);
    }
    for row in more {
        let hash = hasher.hash_one(row.key());
        let candidates = index.entry(hash).or_default();
        if let Some(&i) = candidates.iter().find(|&&i| rows[i].key() == row.key()) {
            let total = &mut rows[i];
            total.samples += row.samples;
            total.off_cpu_ns += row.off_cpu_ns;
            total.off_cpu_count += row.off_cpu_count;
            total.runtime_ns += row.runtime_ns;
            total.waker_ns += row.waker_ns;
            total.critical_ns += row.critical_ns;
            total.goroutine_waker_ns += row.goroutine_waker_ns;
        } else {
            candidates.push(rows.len());
            rows.push(row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(tid: u32, function: &str, samples: u64, off_cpu_ns: u64) -> Sample {
        Sample {
            pid: 1,
            tid,
            comm: Arc::from("app"),
            thread: "app".to_owned(),
            placement: Arc::default(),
            state: ThreadState::Running,
            stack: vec![Location::marker(function.to_owned())],
            samples,
            off_cpu_ns,
            off_cpu_count: 0,
            labels: None,
            runtime_ns: 0,
            waker_ns: 0,
            critical_ns: 0,
            goroutine_waker_ns: 0,
            off_cpu_in_wall: true,
        }
    }

    #[test]
    fn merging_sums_equal_rows_and_keeps_the_rest() {
        let mut rows = vec![row(1, "a", 2, 0), row(1, "b", 1, 0)];
        let more = vec![row(1, "a", 3, 5), row(2, "a", 1, 0), row(2, "a", 4, 0)];
        merge_samples(&mut rows, more);
        let weights: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r.tid,
                    r.stack[0].lines[0].function.as_str(),
                    r.samples,
                    r.off_cpu_ns,
                )
            })
            .collect();
        assert_eq!(weights, [(1, "a", 5, 5), (1, "b", 1, 0), (2, "a", 5, 0)]);
    }
}

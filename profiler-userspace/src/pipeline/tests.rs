//! The pipeline against the kernel's maps in memory (`bpf/in_memory.rs`):
//! chunks drained, collected into a window and written, without root.
use std::{path::Path, sync::Arc};

use profiler_common::{sample::ThreadState, stats::Stat};

use super::*;
use crate::{
    bpf::in_memory::MemoryKernel,
    output::pprof::proto,
    sample::{RawSample, Stack},
    testing::{comment, config, row, total},
};

/// A pipeline of a profiler of one (absent) pid, over maps in memory.
struct Setup {
    dir: tempfile::TempDir,
    config: Config,
    pipeline: Pipeline,
    kernel: MemoryKernel,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path(), &["--pid", "4000000"]);
        let assembler = Assembler::start(&config.symbols, None).unwrap().0;
        let pipeline = Pipeline::new(&config, Arc::new(Metrics::new()), None, assembler);
        Self {
            dir,
            config,
            pipeline,
            kernel: MemoryKernel::default(),
        }
    }

    /// Drains a chunk for `reason` and collects it; returns how many rows
    /// it had and its end.
    async fn drain(&mut self, reason: DrainReason) -> (usize, u64) {
        let target = self.config.target.clone();
        let (chunk, end_ns) = self
            .pipeline
            .drain_chunk(&mut self.kernel, &self.config, &target, reason)
            .await
            .unwrap();
        let chunk = chunk.finish();
        let rows = chunk.samples().len();
        self.pipeline.collect(chunk);
        (rows, end_ns)
    }

    /// Ends the window at `end_ns`.
    fn finish(&mut self, end_ns: u64, unwind_comments: Vec<String>) {
        let target = self.config.target.clone();
        self.pipeline
            .finish(&self.config, &target, end_ns, unwind_comments, Vec::new());
    }
}

/// The one profile written to `dir`.
fn written(dir: &Path) -> proto::Profile {
    let mut profiles = crate::testing::written(dir);
    assert_eq!(profiles.len(), 1);
    profiles.remove(0)
}

/// Waits for the window's one segment and checks that it wrote the file.
async fn assert_written(pipeline: &mut Pipeline) {
    assert!(
        pipeline.waiting(),
        "the window's segment is with the symbolizer"
    );
    let segment = pipeline.next_assembled().await;
    assert!(matches!(pipeline.absorb(segment), Some(Written::Done)));
    assert!(!pipeline.waiting());
}

/// Two chunks (the first drained early, as a filling map makes the daemon
/// do) and the intervals still open at the end add up to one window, in
/// one file, with equal rows merged and every count in the comments.
#[tokio::test]
async fn a_window_of_chunks_is_written_whole() {
    let mut t = Setup::new();
    t.kernel.record(row(7, ThreadState::Running, 3, 0));
    t.kernel.count(Stat::StackMapFull, 1);
    t.kernel.advance(1_000_000_000);
    t.drain(DrainReason::Full).await;

    t.kernel.record(row(7, ThreadState::Running, 2, 0));
    t.kernel.record(row(8, ThreadState::Sleeping, 0, 5_000_000));
    t.kernel.open.push(RawSample {
        user_stack: Stack::StillOffCpu,
        ..row(9, ThreadState::Sleeping, 0, 1_000_000)
    });
    t.kernel.advance(1_000_000_000);
    let (rows, end_ns) = t.drain(DrainReason::Window).await;
    assert_eq!(rows, 3, "two rows and one open interval");
    t.finish(end_ns, vec!["unwind_tables=0".into()]);
    assert_written(&mut t.pipeline).await;

    let p = written(t.dir.path());
    assert_eq!(t.kernel.flips, 2);
    assert_eq!(total(&p, "samples"), 5);
    assert_eq!(total(&p, "off_cpu"), 6_000_000);
    assert_eq!(p.duration_nanos, 2_000_000_000, "two chunks of 1 s");
    let on_cpu_rows = p.sample.iter().filter(|s| s.value[0] > 0).count();
    assert_eq!(on_cpu_rows, 1, "the chunks' equal rows are merged");
    assert_eq!(comment(&p, "early_drains"), Some(1));
    assert_eq!(comment(&p, "stack_map_full_drops"), Some(1));
    assert_eq!(comment(&p, "on_cpu_samples"), Some(5));
    assert_eq!(comment(&p, "off_cpu_in_flight_tracked"), Some(1));
    assert_eq!(comment(&p, "unwind_tables"), Some(0));
}

/// Nothing recorded: the window is still written, empty, with its
/// duration.
#[tokio::test]
async fn an_empty_window_is_written_too() {
    let mut t = Setup::new();
    t.kernel.advance(500_000_000);
    let (_, end_ns) = t.drain(DrainReason::Window).await;
    t.finish(end_ns, Vec::new());
    assert_written(&mut t.pipeline).await;
    let p = written(t.dir.path());
    assert!(p.sample.is_empty());
    assert_eq!(p.duration_nanos, 500_000_000);
}

/// The loop goes on while the symbolizer has a window: chunks of the next
/// window, drained before the first window is back, stay out of it, and
/// each file lasts as long as its own chunks.
#[tokio::test]
async fn a_window_drained_while_the_one_before_is_symbolized_keeps_to_itself() {
    let mut t = Setup::new();
    for (tid, samples, seconds) in [(7, 3, 1), (8, 2, 2)] {
        t.kernel.record(row(tid, ThreadState::Running, samples, 0));
        t.kernel.advance(seconds * 1_000_000_000);
        let (_, end_ns) = t.drain(DrainReason::Window).await;
        t.finish(end_ns, Vec::new());
    }
    for _ in 0..2 {
        let segment = t.pipeline.next_assembled().await;
        assert!(matches!(t.pipeline.absorb(segment), Some(Written::Done)));
    }
    assert!(!t.pipeline.waiting());

    let got: Vec<(i64, i64)> = crate::testing::written(t.dir.path())
        .iter()
        .map(|p| (total(p, "samples"), p.duration_nanos))
        .collect();
    assert_eq!(got, [(3, 1_000_000_000), (2, 2_000_000_000)]);
}

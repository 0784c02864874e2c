//! The pipeline against the kernel's maps in memory (`bpf/memory.rs`):
//! chunks drained, collected into a window and written, without root.
use std::{path::Path, sync::Arc};

use profiler_common::{sample::ThreadState, stats::Stat};

use super::*;
use crate::{
    bpf::memory::MemoryKernel,
    pprof::proto,
    sample::{RawSample, Stack},
    testing::{comment, config, row, total},
};

fn assembler(config: &Config) -> Assembler {
    Assembler::start(&config.symbols).unwrap().0
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
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &["--pid", "4000000"]);
    let target = config.target.clone();
    let mut pipeline = Pipeline::new(&config, Arc::new(Metrics::new()), None, assembler(&config));
    let mut kernel = MemoryKernel::default();

    kernel.record(row(7, ThreadState::Running, 3, 0));
    kernel.count(Stat::StackMapFull, 1);
    kernel.advance(1_000_000_000);
    let (chunk, _) = pipeline
        .drain_chunk(&mut kernel, &config, &target, DrainReason::Full)
        .await
        .unwrap();
    pipeline.collect(chunk);

    kernel.record(row(7, ThreadState::Running, 2, 0));
    kernel.record(row(8, ThreadState::Sleeping, 0, 5_000_000));
    kernel.open.push(RawSample {
        user_stack: Stack::StillOffCpu,
        ..row(9, ThreadState::Sleeping, 0, 1_000_000)
    });
    kernel.advance(1_000_000_000);
    let (chunk, end_ns) = pipeline
        .drain_chunk(&mut kernel, &config, &target, DrainReason::Window)
        .await
        .unwrap();
    assert_eq!(chunk.samples.len(), 3, "two rows and one open interval");
    pipeline.collect(chunk);
    pipeline.finish(&config, &target, end_ns, vec!["unwind_tables=0".into()]);
    assert_written(&mut pipeline).await;

    let p = written(dir.path());
    assert_eq!(kernel.flips, 2);
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
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &["--pid", "4000000"]);
    let target = config.target.clone();
    let mut pipeline = Pipeline::new(&config, Arc::new(Metrics::new()), None, assembler(&config));
    let mut kernel = MemoryKernel::default();
    kernel.advance(500_000_000);
    let (chunk, end_ns) = pipeline
        .drain_chunk(&mut kernel, &config, &target, DrainReason::Window)
        .await
        .unwrap();
    pipeline.collect(chunk);
    pipeline.finish(&config, &target, end_ns, Vec::new());
    assert_written(&mut pipeline).await;
    let p = written(dir.path());
    assert!(p.sample.is_empty());
    assert_eq!(p.duration_nanos, 500_000_000);
}

/// The loop goes on while the symbolizer has a window: chunks of the next
/// window, drained before the first window is back, stay out of it, and
/// each file lasts as long as its own chunks.
#[tokio::test]
async fn a_window_drained_while_the_one_before_is_symbolized_keeps_to_itself() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &["--pid", "4000000"]);
    let target = config.target.clone();
    let mut pipeline = Pipeline::new(&config, Arc::new(Metrics::new()), None, assembler(&config));
    let mut kernel = MemoryKernel::default();
    for (tid, samples, seconds) in [(7, 3, 1), (8, 2, 2)] {
        kernel.record(row(tid, ThreadState::Running, samples, 0));
        kernel.advance(seconds * 1_000_000_000);
        let (chunk, end_ns) = pipeline
            .drain_chunk(&mut kernel, &config, &target, DrainReason::Window)
            .await
            .unwrap();
        pipeline.collect(chunk);
        pipeline.finish(&config, &target, end_ns, Vec::new());
    }
    for _ in 0..2 {
        let segment = pipeline.next_assembled().await;
        assert!(matches!(pipeline.absorb(segment), Some(Written::Done)));
    }
    assert!(!pipeline.waiting());

    let got: Vec<(i64, i64)> = crate::testing::written(dir.path())
        .iter()
        .map(|p| (total(p, "samples"), p.duration_nanos))
        .collect();
    assert_eq!(got, [(3, 1_000_000_000), (2, 2_000_000_000)]);
}

//! The pipeline against the kernel's maps in memory (`bpf/memory.rs`):
//! chunks drained, collected into a window and written, without root.
use std::{io::Read as _, path::Path, sync::Arc};

use profiler_common::sample::ThreadState;
use prost::Message as _;

use super::*;
use crate::{
    bpf::memory::MemoryKernel,
    cli::{self, KernelLimits},
    pprof::proto,
    window::{RawSample, Stack},
};

/// No process has this pid: its stacks stay addresses.
const PID: u32 = 4_000_000;

fn config(dir: &Path) -> Config {
    let args = ["profiler", "--pid", "4000000", "--output-dir"];
    cli::parse(
        args.iter()
            .map(Into::into)
            .chain([dir.as_os_str().to_owned()]),
        KernelLimits {
            max_sample_rate: 1000,
        },
    )
    .unwrap()
}

fn assembler(config: &Config) -> Assembler {
    Assembler::start(&config.symbols).unwrap().0
}

fn row(tid: u32, state: ThreadState, samples: u64, off_cpu_ns: u64) -> RawSample {
    RawSample {
        pid: PID,
        tid,
        thread: "worker".into(),
        state,
        user_stack: Stack::Frames(Arc::from([0x40_1000, 0x40_2000])),
        kernel_stack: Stack::Absent,
        samples,
        off_cpu_ns,
        off_cpu_count: u64::from(off_cpu_ns > 0),
        goroutine: None,
        goroutine_ns: 0,
    }
}

/// The one profile written to `dir`.
fn written(dir: &Path) -> proto::Profile {
    let files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".pb.gz"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&files[0]).unwrap())
        .read_to_end(&mut bytes)
        .unwrap();
    proto::Profile::decode(&bytes[..]).unwrap()
}

/// Sum of sample type `name` over the profile.
fn total(p: &proto::Profile, name: &str) -> i64 {
    let i = p
        .sample_type
        .iter()
        .position(|t| p.string_table[usize::try_from(t.r#type).unwrap()] == name)
        .unwrap();
    p.sample.iter().map(|s| s.value[i]).sum()
}

fn comment(p: &proto::Profile, name: &str) -> Option<u64> {
    p.comment.iter().find_map(|&c| {
        p.string_table[usize::try_from(c).unwrap()]
            .strip_prefix(name)?
            .strip_prefix('=')?
            .parse()
            .ok()
    })
}

/// Two chunks (the first drained early, as a filling map makes the daemon
/// do) and the intervals still open at the end add up to one window, in
/// one file, with equal rows merged and every count in the comments.
#[tokio::test]
async fn a_window_of_chunks_is_written_whole() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
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
    assert!(matches!(
        pipeline.finish(&config, &target, end_ns, vec!["unwind_tables=0".into()]),
        Written::Done
    ));

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
    let config = config(dir.path());
    let target = config.target.clone();
    let mut pipeline = Pipeline::new(&config, Arc::new(Metrics::new()), None, assembler(&config));
    let mut kernel = MemoryKernel::default();
    kernel.advance(500_000_000);
    let (chunk, end_ns) = pipeline
        .drain_chunk(&mut kernel, &config, &target, DrainReason::Window)
        .await
        .unwrap();
    pipeline.collect(chunk);
    assert!(matches!(
        pipeline.finish(&config, &target, end_ns, Vec::new()),
        Written::Done
    ));
    let p = written(dir.path());
    assert!(p.sample.is_empty());
    assert_eq!(p.duration_nanos, 500_000_000);
}

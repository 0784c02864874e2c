//! The window loop against the kernel's maps in memory (`bpf/in_memory.rs`),
//! in tokio's paused time, without root: which events end chunks and
//! windows, and what each written file holds.
use profiler_common::{sample::ThreadState, unwind::UnwindRow};

use super::*;
use crate::{
    bpf::in_memory::{MemoryKernel, Step},
    testing::{comment, config, row, total, written},
};

const SECOND: u64 = 1_000_000_000;

/// Runs the loop over `kernel` with `flags` until the last window is
/// written; returns the kernel as the loop left it.
async fn run_loop(dir: &std::path::Path, flags: &[&str], mut kernel: MemoryKernel) -> MemoryKernel {
    let config = config(dir, flags);
    kernel.rows = vec![UnwindRow::default(); config.unwind.table_rows() as usize];
    let (assembler, symbolizer) = Assembler::start(&config.symbols, None).unwrap();
    let pipeline = Pipeline::new(&config, Arc::new(Metrics::new()), None, assembler);
    let targets = Targets::new(&config.target, &config.discover);
    let signals = Signals::install().unwrap();
    let mut daemon = Daemon::new(
        &config,
        kernel,
        targets,
        pipeline,
        (None, None),
        (signals, None),
    )
    .unwrap();
    daemon.run_windows().await.unwrap();
    let Daemon {
        kernel, pipeline, ..
    } = daemon;
    drop(pipeline);
    symbolizer.join();
    kernel
}

/// A step of `ns` in which thread `tid` was sampled `samples` times.
fn sampled(tid: u32, samples: u64, ns: u64) -> Step {
    Step {
        rows: vec![row(tid, ThreadState::Running, samples, 0)],
        ns,
    }
}

/// A 25 s run of 10 s windows writes three files: two whole windows and
/// the last, cut at the deadline; each holds its own chunk and lasts as
/// long as the kernel's clock says.
#[tokio::test(start_paused = true)]
async fn windows_end_every_interval_and_the_run_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let me = std::process::id().to_string();
    let mut kernel = MemoryKernel::default();
    kernel.script.extend([
        sampled(1, 1, 10 * SECOND),
        sampled(2, 2, 10 * SECOND),
        sampled(3, 3, 5 * SECOND),
        sampled(4, 100, SECOND),
    ]);
    let flags = ["--pid", &me, "--interval", "10s", "--duration", "25s"];
    let kernel = run_loop(dir.path(), &flags, kernel).await;

    assert_eq!(kernel.flips, 3, "one drain per window");
    let me = std::process::id();
    assert!(
        kernel.mappings.contains_key(&me),
        "the target's tables published"
    );
    let profiles = written(dir.path());
    let samples: Vec<_> = profiles.iter().map(|p| total(p, "samples")).collect();
    assert_eq!(samples, [1, 2, 3], "each window its own chunk, in order");
    let durations: Vec<_> = profiles.iter().map(|p| p.duration_nanos).collect();
    assert_eq!(
        durations,
        [10 * SECOND, 10 * SECOND, 5 * SECOND].map(|ns| i64::try_from(ns).unwrap())
    );
}

/// A samples map three quarters full is drained at once into the
/// window, which still ends on time, whole, and counts the early drain.
#[tokio::test(start_paused = true)]
async fn a_filling_map_is_drained_into_the_same_window() {
    let dir = tempfile::tempdir().unwrap();
    let me = std::process::id().to_string();
    let mut kernel = MemoryKernel::default();
    let threshold = crate::testing::early_drain_rows();
    for tid in 0..threshold {
        kernel.record(row(tid, ThreadState::Running, 1, 0));
    }
    kernel.script.extend([
        Step {
            rows: Vec::new(),
            ns: SECOND,
        },
        sampled(1, 5, 4 * SECOND),
    ]);
    let flags = ["--pid", &me, "--interval", "10s", "--duration", "5s"];
    let kernel = run_loop(dir.path(), &flags, kernel).await;

    assert_eq!(kernel.flips, 2, "the early drain, then the window's end");
    let profiles = written(dir.path());
    assert_eq!(profiles.len(), 1, "both chunks in one window");
    let p = &profiles[0];
    assert_eq!(total(p, "samples"), i64::from(threshold) + 5);
    assert_eq!(comment(p, "early_drains"), Some(1));
    assert_eq!(p.duration_nanos, i64::try_from(5 * SECOND).unwrap());
}

/// When the only target has exited, the run ends at the next check with
/// its last window written, long before the interval or the deadline;
/// the kernel's target set is left empty.
#[tokio::test(start_paused = true)]
async fn the_run_ends_when_every_target_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    child.wait().unwrap();
    let gone = child.id();
    let mut kernel = MemoryKernel::default();
    kernel.targets.insert(gone);
    kernel.script.push_back(sampled(1, 7, SECOND / 2));
    let gone = gone.to_string();
    let flags = ["--pid", &gone, "--interval", "60s", "--duration", "1h"];
    let started = tokio::time::Instant::now();
    let kernel = run_loop(dir.path(), &flags, kernel).await;

    // The drain's time, not the run's: while the loop waits for the
    // symbolizer's thread to hand back the last window, the runtime is idle
    // and paused time jumps to the next timer (the 60 s ticker).
    assert_eq!(kernel.flips, 1);
    let drained = kernel.flipped_at[0] - started;
    assert!(drained < Duration::from_secs(1), "{drained:?}");
    assert!(kernel.targets.is_empty());
    let profiles = written(dir.path());
    assert_eq!(profiles.len(), 1);
    assert_eq!(total(&profiles[0], "samples"), 7);
}

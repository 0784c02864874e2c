//! Rows of a window for the tests of the wait-graph readers
//! (`critical_path`, `what_if`): process 1, threads named `t<tid>`.
use std::sync::Arc;

use profiler_common::sample::ThreadState;

use super::wakers::WaitedOn;
use crate::profile::{Location, Sample};

/// A row of thread `tid` in `state`, its stack the one frame `function`.
pub fn row(tid: u32, state: ThreadState, function: &str, samples: u64, off_cpu_ns: u64) -> Sample {
    Sample {
        pid: 1,
        tid,
        comm: Arc::from("app"),
        thread: format!("t{tid}"),
        placement: Arc::default(),
        state,
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

/// Woken by thread `tid`.
pub fn by(tid: u32) -> WaitedOn {
    WaitedOn::Thread {
        pid: 1,
        tid,
        name: format!("t{tid}"),
    }
}

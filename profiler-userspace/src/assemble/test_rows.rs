//! Rows of a window for the tests of the wait-graph readers
//! (`critical_path`, `what_if`): process 1, threads named `t<tid>`.
use std::{borrow::Cow, sync::Arc};

use profiler_common::sample::ThreadState;

use super::{critical_path::Waits, wakers::WaitedOn};
use crate::{
    profile::{Location, Sample},
    sample::{Label, LabelValue, RowLabels, goroutine_label},
};

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

/// An on-CPU row of thread `tid` running goroutine `goid`, as the kernel
/// records it with `--goroutine-wakers`.
pub fn running(tid: u32, goid: u64, function: &str, samples: u64) -> Sample {
    Sample {
        labels: Some(Arc::new(RowLabels {
            replaces_thread: false,
            labels: vec![goroutine_label(goid)],
        })),
        ..row(tid, ThreadState::Running, function, samples, 0)
    }
}

/// A goroutine view's row of goroutine `goid` in `state` (`waiting`,
/// `runnable`, `syscall`), `ns` long.
pub fn goroutine(goid: u64, state: &'static str, function: &str, ns: u64) -> Sample {
    let state = Label {
        key: Cow::Borrowed("state"),
        attribute: Cow::Borrowed("go.goroutine.state"),
        value: LabelValue::Static(state),
    };
    Sample {
        tid: 0,
        state: ThreadState::Unknown,
        labels: Some(Arc::new(RowLabels {
            replaces_thread: true,
            labels: vec![goroutine_label(goid), state],
        })),
        runtime_ns: ns,
        ..row(0, ThreadState::Unknown, function, 0, 0)
    }
}

/// Goroutines' waits that ended, as the goroutine wakers give them:
/// (goroutine, function, ms, the goroutine that woke it; 0 for the Go
/// runtime).
pub fn goroutine_waits(waits: &[(u64, &str, u64, u64)]) -> Waits {
    Waits {
        threads: Vec::new(),
        goroutines: waits
            .iter()
            .map(|&(goid, function, ms, by)| {
                let row = goroutine(goid, "waiting", function, ms * 1_000_000);
                (row, WaitedOn::Goroutine(by))
            })
            .collect(),
    }
}

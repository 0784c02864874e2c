//! What the sources record before anything is symbolized: the kernel's
//! aggregated entries and the language runtimes' rows, with their stacks
//! as addresses, and the labels a runtime puts on a row; and the kernel
//! code the kernel's records say was loaded. Both `bpf/` and
//! `runtimes/` produce these; this file imports nothing of the crate.
use std::{
    borrow::Cow,
    sync::{Arc, LazyLock},
};

use profiler_common::{
    maps::{SAMPLES_MAX_ENTRIES, STACKS_MAX_ENTRIES},
    python,
    sample::ThreadState,
};

/// A captured stack, or why there is none.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Stack {
    /// Instruction pointers, leaf first.
    Frames(Arc<[u64]>),
    /// The same, cut at the frame limit with frames left (the walk went
    /// on past `MAX_STACK_DEPTH`): shown with a `[truncated]` root frame.
    Truncated(Arc<[u64]>),
    /// No such context: a kernel thread has no user stack, a sample taken
    /// in user mode has no kernel stack.
    Absent,
    /// Capture failed with this errno (or the stack was missing from the
    /// window's stack map: ENOENT); the weight is kept under a marker.
    Lost { errno: i32 },
    /// Function names only, leaf first (a blocked thread's kernel stack
    /// from `/proc/<pid>/task/<tid>/stack`).
    Named(Arc<[String]>),
    /// Not captured: the thread was still off the CPU when the window
    /// ended, and its user stack can only be read when it runs.
    StillOffCpu,
}

/// One aggregated kernel entry of a window.
#[derive(Clone, Debug)]
pub struct RawSample {
    pub pid: u32,
    pub tid: u32,
    /// The thread's name as the kernel saw it.
    pub thread: String,
    pub state: ThreadState,
    pub user_stack: Stack,
    pub kernel_stack: Stack,
    /// Number of on-CPU samples.
    pub samples: u64,
    /// Debiased off-CPU nanoseconds.
    pub off_cpu_ns: u64,
    /// Debiased off-CPU events, in `off_cpu::COUNT_SCALE` units.
    pub off_cpu_count: u64,
    /// What a language runtime says of the row (a goroutine's id, state
    /// and wait reason); `None` for the kernel's rows.
    pub labels: Option<Arc<RowLabels>>,
    /// Nanoseconds a runtime's own unit (a goroutine) spent not running:
    /// the weight of the rows a runtime adds (the `goroutine` sample
    /// type).
    pub runtime_ns: u64,
    /// The program's label set the kernel saw current at the row's
    /// samples, until read into `labels` (a Go goroutine's pprof labels).
    pub label_set: Option<LabelSetAt>,
    /// The attributes of the OpenTelemetry thread context record current
    /// at the row's samples, by key index, until named with the process's
    /// `threadlocal.attribute_key_map` when the window is assembled.
    pub thread_attrs: Option<Arc<ThreadAttrValues>>,
    /// Who woke the thread, for blocked weight with `--wakers`.
    pub woken_by: Option<WokenBy>,
}

/// Who ended a blocked interval (`--wakers`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WokenBy {
    /// Not recorded: the interval was under its threshold at the wakeup,
    /// or the record was lost.
    Unknown,
    /// The context the wakeup ran in: a thread, or an interrupt (its
    /// kernel stack says which; then the ids are the interrupted task's).
    Waker(Arc<Waker>),
    /// The goroutine that made a parked one runnable
    /// (`--goroutine-wakers`).
    Goroutine(Arc<GoroutineWaker>),
    /// Go's network poller, which readies a goroutine waiting on a file
    /// descriptor (`IO wait`) without `runtime.ready`.
    GoPoller,
}

/// A goroutine's wakeup, as the probe on `runtime.ready` recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GoroutineWaker {
    pub pid: u32,
    /// The waking goroutine; 0 when the thread ran none (the runtime's
    /// scheduler: timers, the network poller).
    pub goid: u64,
    /// The waking goroutine's stack, from where it woke the other.
    pub stack: Stack,
}

/// The context of a wakeup, as the kernel recorded it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Waker {
    pub pid: u32,
    pub tid: u32,
    /// Its thread's name.
    pub thread: String,
    pub user_stack: Stack,
    pub kernel_stack: Stack,
}

/// A thread context record's attributes: (key index, value), each index
/// once (its last value in the record).
pub type ThreadAttrValues = [(u8, Arc<str>)];

/// Where a program's label set was when sampled, and its identity then
/// (which tells it from a set made later at the same address).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LabelSetAt {
    pub address: u64,
    pub identity: u64,
}

impl LabelSetAt {
    /// As the kernel recorded it (`address` 0: none).
    #[must_use]
    pub fn of(address: u64, identity: u64) -> Option<Self> {
        (address != 0).then_some(Self { address, identity })
    }
}

/// The labels a language runtime puts on a row, in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowLabels {
    /// The row is about the runtime's own unit (a goroutine), not an OS
    /// thread: it has no thread id, name or state labels.
    pub replaces_thread: bool,
    pub labels: Vec<Label>,
}

/// One label: its pprof key, its OTLP attribute name, and its value
/// (the program's own, as a Go program's pprof labels, or ours).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label {
    pub key: Cow<'static, str>,
    pub attribute: Cow<'static, str>,
    pub value: LabelValue,
}

impl Label {
    /// A program's own label, `key` in pprof and OTLP alike (a Go pprof
    /// label, an OpenTelemetry resource attribute).
    #[must_use]
    pub fn own(key: String, value: &str) -> Self {
        let key: Cow<'static, str> = Cow::Owned(key);
        Self {
            attribute: key.clone(),
            key,
            value: LabelValue::Str(Arc::from(value)),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LabelValue {
    Num(i64),
    Str(Arc<str>),
    /// A value from a fixed set (a goroutine's state): no allocation per
    /// row.
    Static(&'static str),
}

/// The label that names a goroutine: on its rows of the goroutine view,
/// and with `--goroutine-wakers` on its thread's on-CPU samples.
pub const GOROUTINE_LABEL: &str = "goroutine";

/// The label of goroutine `goid` ([`GOROUTINE_LABEL`]).
#[must_use]
pub fn goroutine_label(goid: u64) -> Label {
    Label {
        key: Cow::Borrowed(GOROUTINE_LABEL),
        attribute: Cow::Borrowed("go.goroutine.id"),
        value: LabelValue::Num(i64::try_from(goid).unwrap_or(i64::MAX)),
    }
}

/// The goroutine `labels` name ([`goroutine_label`]), if any.
#[must_use]
pub fn goroutine_of(labels: Option<&RowLabels>) -> Option<u64> {
    labels?.labels.iter().find_map(|l| match l.value {
        LabelValue::Num(goid) if l.key == GOROUTINE_LABEL => u64::try_from(goid).ok(),
        _ => None,
    })
}

/// The labels of a kernel row of a Python thread: whether it held the GIL
/// (`SampleKey::python_gil`, a `profiler_common::python::gil`); `None`
/// for other threads.
#[must_use]
pub fn python_gil_labels(gil: u32) -> Option<Arc<RowLabels>> {
    static HOLDS: LazyLock<Arc<RowLabels>> = LazyLock::new(|| gil_labels("holds"));
    static RELEASED: LazyLock<Arc<RowLabels>> = LazyLock::new(|| gil_labels("released"));
    match gil {
        python::gil::HOLDS => Some(HOLDS.clone()),
        python::gil::RELEASED => Some(RELEASED.clone()),
        _ => None,
    }
}

/// The labels of a sample taken in trace `trace_id`, span `span_id` (as
/// the kernel read them from OpenTelemetry's thread context,
/// `runtimes/thread_ctx.rs`; zeros for none): W3C's lowercase hex, under
/// `trace_id` and `span_id` (Pyroscope's key for span profiles).
#[must_use]
pub fn trace_labels(trace_id: [u8; 16], span_id: [u8; 8]) -> Vec<Label> {
    if trace_id == [0; 16] {
        return Vec::new();
    }
    let hex = |bytes: &[u8]| -> Arc<str> {
        let text = bytes.iter().fold(String::new(), |mut out, b| {
            let _ = std::fmt::Write::write_fmt(&mut out, format_args!("{b:02x}"));
            out
        });
        Arc::from(text)
    };
    vec![
        Label {
            key: "trace_id".into(),
            attribute: "trace_id".into(),
            value: LabelValue::Str(hex(&trace_id)),
        },
        Label {
            key: "span_id".into(),
            attribute: "span_id".into(),
            value: LabelValue::Str(hex(&span_id)),
        },
    ]
}

/// `labels` with the label saying whether the sample's compiled Java
/// frames were named from their own debug points (`java_frames`:
/// `exact` or `approximate`; OTLP's `java.frames`).
#[must_use]
pub fn with_java_frames_label(labels: Option<Arc<RowLabels>>, approximate: bool) -> Arc<RowLabels> {
    let label = Label {
        key: Cow::Borrowed("java_frames"),
        attribute: Cow::Borrowed("java.frames"),
        value: LabelValue::Static(if approximate { "approximate" } else { "exact" }),
    };
    with_labels(labels, &[label])
}

/// `labels` followed by `more`.
#[must_use]
pub fn with_labels(labels: Option<Arc<RowLabels>>, more: &[Label]) -> Arc<RowLabels> {
    let mut row = labels.map_or_else(
        || RowLabels {
            replaces_thread: false,
            labels: Vec::new(),
        },
        |l| (*l).clone(),
    );
    row.labels.extend_from_slice(more);
    Arc::new(row)
}

fn gil_labels(value: &'static str) -> Arc<RowLabels> {
    Arc::new(RowLabels {
        replaces_thread: false,
        labels: vec![Label {
            key: Cow::Borrowed("gil"),
            attribute: Cow::Borrowed("python.gil"),
            value: LabelValue::Static(value),
        }],
    })
}

/// Kernel code loaded, from a ksymbol record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSymbol {
    /// Its place among all the records read, from 1: a window assembled
    /// after a later one (an on-demand profile's, a push's) does not take
    /// the table back to an older state.
    pub seq: u64,
    pub start: u64,
    pub len: u32,
    /// As kallsyms would list it (`bpf_prog_<tag>_<name>`).
    pub name: String,
}

/// How many entries the kernel's maps held when drained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapEntries {
    pub samples: u32,
    pub stacks: u32,
}

impl MapEntries {
    /// Fill of the samples and stacks maps, 0 to 1.
    #[must_use]
    pub fn fill(self) -> (f64, f64) {
        (
            f64::from(self.samples) / f64::from(SAMPLES_MAX_ENTRIES),
            f64::from(self.stacks) / f64::from(STACKS_MAX_ENTRIES),
        )
    }
}

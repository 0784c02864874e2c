//! Go: the goroutine view, where a Go program's goroutines wait, read
//! from outside the process. Each Go target's goroutine list is read at a
//! fixed rate with `process_vm_readv` (the target is not stopped and pays
//! nothing), every goroutine that is not running is unwound from where it
//! stopped, and each row is a goroutine's stack, labelled with its id,
//! state and wait reason, weighted by the time it stands for.
//!
//! `runtime.rs` finds a binary's runtime facts (version, `allgs`,
//! offsets: `dwarf.rs`, or `known.rs`'s table of known versions'
//! `layout.rs`), `g.rs`
//! decodes one `g`, `process.rs` reads one process's goroutines, and
//! `wakers.rs` follows their waits to the goroutines that ended them
//! (`--goroutine-wakers`).
mod dwarf;
pub(crate) mod g;
pub mod known;
mod labelled;
mod labels;
pub mod layout;
pub(crate) mod process;
pub mod runtime;
mod wakers;

use std::{borrow::Cow, sync::Arc};

pub use labelled::GoLabels;

use g::GoroutineStatus;
use process::{GoProcess, Read, ReadError};
use runtime::GoRuntime;

use super::seam::{self, Kind, Loaded, Runtime, RuntimeProcess, Unit};
use crate::{
    gopclntab::GoTable,
    process::maps::{self, FileId},
    sample::{Label, LabelValue, RowLabels, Stack, WokenBy, goroutine_label},
};

/// The Go runtime.
pub struct Go {
    /// The goroutines' last wakeups, with `--goroutine-wakers`.
    pub wakes: Option<Arc<dyn crate::bpf::GoWakeLookup>>,
}

/// A Go binary's runtime facts and table, shared by its processes.
pub type Binary = Arc<(Arc<GoRuntime>, Arc<GoTable>)>;

impl Runtime for Go {
    type Binary = Binary;
    type Process = GoProcess;
    const KIND: Kind = Kind::Go;

    /// The runtime facts and table of `pid`'s binary; [`Loaded::Not`],
    /// with one log line for a Go binary that cannot be read, when it has
    /// none.
    fn load(&self, pid: u32, file: FileId) -> Loaded<Binary> {
        let Some(map) = map_exe(pid, file) else {
            return Loaded::NotNow;
        };
        let exe = std::path::PathBuf::from(format!("/proc/{pid}/exe"));
        let runtime = match GoRuntime::of_data(&map) {
            Ok(Some(runtime)) => runtime,
            Ok(None) => return Loaded::Not,
            Err(e) => {
                log::warn!(
                    "pid {pid}: no goroutine view, thread-level profiling only: {}",
                    crate::error_chain(&e)
                );
                return Loaded::Not;
            }
        };
        let Ok(Some(table)) = GoTable::from_data(map) else {
            return Loaded::Not;
        };
        log::info!(
            "pid {pid}: goroutine view on ({}, {})",
            runtime.version,
            exe.read_link().unwrap_or_default().display()
        );
        Loaded::Runtime(Arc::new((Arc::new(runtime), Arc::new(table))))
    }

    fn attach(&self, pid: u32, file: FileId, binary: &Binary) -> Option<GoProcess> {
        let (runtime, table) = &**binary;
        let vmas = maps::read(pid).ok()?;
        // By identity; by path where the two disagree on the device (an
        // overlay file system in a container).
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        let text = vmas.iter().find(|v| v.file == Some(file)).or_else(|| {
            let exe = exe?;
            vmas.iter().find(|v| std::path::Path::new(&*v.path) == exe)
        })?;
        let bias = text
            .start
            .wrapping_sub(text.offset)
            .wrapping_sub(runtime.text_delta);
        let mut process = GoProcess::new(pid, Arc::clone(runtime), Arc::clone(table), bias);
        process.waits = self
            .wakes
            .as_ref()
            .map(|wakes| wakers::Waits::new(pid, Arc::clone(wakes)));
        Some(process)
    }
}

/// What tells one goroutine's row from another's besides its stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GoroutineKey {
    pub goid: u64,
    pub status: GoroutineStatus,
    /// The runtime's name for what it waits on; `None` unless waiting.
    pub wait_reason: Option<Arc<str>>,
    /// The function whose `go` statement created it; empty when unknown.
    pub created_by: Arc<str>,
    /// Its pprof labels, sorted by key.
    pub labels: Arc<[Label]>,
    /// On a row of a wait that ended (`--goroutine-wakers`): what ended
    /// it. Such a row's time is the wait's rows' again.
    pub woken_by: Option<WokenBy>,
}

impl RuntimeProcess for GoProcess {
    type Error = ReadError;
    type Key = GoroutineKey;

    fn labels(key: &GoroutineKey) -> RowLabels {
        goroutine_labels(key)
    }

    fn woken_by(key: &GoroutineKey) -> Option<WokenBy> {
        key.woken_by.clone()
    }

    fn read(
        &mut self,
        budget: usize,
        rotation: usize,
        elapsed_ns: u64,
    ) -> Result<seam::Read<GoroutineKey>, ReadError> {
        let began_ns = crate::clock::now_ns(libc::CLOCK_MONOTONIC);
        let Read {
            goroutines,
            stride,
            torn,
        } = GoProcess::read(self, budget, rotation)?;
        let units = goroutines
            .into_iter()
            .map(|o| {
                let wait_reason = (o.status == GoroutineStatus::Waiting)
                    .then(|| self.runtime.wait_reason(o.wait_reason));
                Unit {
                    key: GoroutineKey {
                        goid: o.goid,
                        status: o.status,
                        wait_reason,
                        created_by: o.created_by,
                        labels: o.labels,
                        woken_by: None,
                    },
                    stack: if o.truncated {
                        Stack::Truncated(Arc::from(o.stack))
                    } else {
                        Stack::Frames(Arc::from(o.stack))
                    },
                }
            })
            .collect::<Vec<_>>();
        let weight = elapsed_ns.saturating_mul(stride as u64);
        let ended = self.waits.as_mut().map_or_else(Vec::new, |waits| {
            waits.after_read(&units, weight, stride == 1, began_ns)
        });
        Ok(seam::Read {
            units,
            stride,
            torn,
            ended,
        })
    }
}

/// A goroutine's labels: its id, its state, what it waits on and who
/// created it where known (`go tool pprof -tagfocus` selects by them),
/// then the program's own pprof labels, each under its own key.
#[must_use]
pub fn goroutine_labels(key: &GoroutineKey) -> RowLabels {
    let mut labels = vec![
        goroutine_label(key.goid),
        Label {
            key: Cow::Borrowed("state"),
            attribute: Cow::Borrowed("go.goroutine.state"),
            value: LabelValue::Static(key.status.label()),
        },
    ];
    if let Some(wait_reason) = key.wait_reason.as_ref().filter(|w| !w.is_empty()) {
        labels.push(Label {
            key: Cow::Borrowed("wait_reason"),
            attribute: Cow::Borrowed("go.goroutine.wait_reason"),
            value: LabelValue::Str(Arc::clone(wait_reason)),
        });
    }
    if !key.created_by.is_empty() {
        labels.push(Label {
            key: Cow::Borrowed("created_by"),
            attribute: Cow::Borrowed("go.goroutine.created_by"),
            value: LabelValue::Str(Arc::clone(&key.created_by)),
        });
    }
    labels.extend(key.labels.iter().cloned());
    RowLabels {
        replaces_thread: true,
        labels,
    }
}

/// `pid`'s executable, mapped, if it is still `file` (an exec since the
/// process was looked at would load another file under `file`'s name).
fn map_exe(pid: u32, file: FileId) -> Option<memmap2::Mmap> {
    use std::os::unix::fs::MetadataExt;
    let exe = std::fs::File::open(format!("/proc/{pid}/exe")).ok()?;
    let meta = exe.metadata().ok()?;
    if (FileId {
        dev: meta.dev(),
        inode: meta.ino(),
    }) != file
    {
        return None;
    }
    // SAFETY: read-only and private; a binary truncated while mapped is
    // the hazard every reader of binaries here accepts (see
    // `GoTable::open`).
    unsafe { memmap2::MmapOptions::new().map_copy_read_only(&exe) }.ok()
}

//! The kernel's maps in memory, for the tests of everything above `bpf/`
//! that run without root: rows recorded into the active slot as the
//! programs would record them, drained slot by slot with the counters
//! since the last drain, the target set, the intervals still open, and
//! the unwinder's maps.
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use profiler_common::{
    go::{GoProcess, LabelSetSeen},
    java::{FrameSeen, JavaProcess},
    process::ProcessSeen,
    python::{CodeSeen, PythonProcess},
    stats::{Stat, StatCounts},
    thread_ctx::ThreadCtxProcess,
    unwind::{
        ProcessMappings, UnwindRow,
        by_file::{FileKey, FileTable},
    },
};

use super::{
    drain::{Drained, Flip, WindowMaps},
    error::KernelError,
    go_maps::GoMaps,
    in_flight::{InFlightMaps, InFlightStats},
    java_maps::JavaMaps,
    python_maps::PythonMaps,
    rng::Rng,
    targets::TargetMaps,
    thread_ctx_maps::ThreadCtxMaps,
    unwind_maps::UnwindMaps,
};
use crate::{
    config::{OffCpu, Target},
    sample::{MapEntries, RawSample, Stack},
};

/// The two slots of the window's maps, the counters, the target set and
/// the open intervals; time is the caller's (`advance`).
#[derive(Default)]
pub struct MemoryKernel {
    slots: [Vec<RawSample>; 2],
    active: usize,
    now_ns: u64,
    last_flip_ns: u64,
    /// Counters since the last drain, by [`Stat`].
    stats: StatCounts,
    /// Threads still off the CPU: the part each would add at a window's
    /// end, whatever the rule.
    pub open: Vec<RawSample>,
    pub targets: BTreeSet<u32>,
    /// Flips so far.
    pub flips: u32,
    /// When each flip happened, on tokio's clock (paused in the loop's
    /// tests).
    pub flipped_at: Vec<tokio::time::Instant>,
    /// What happens during each chunk, for a test that does not drive the
    /// flips itself: the next step is played just before each flip.
    pub script: VecDeque<Step>,
    /// The unwinder's row array (empty: no tables), published mappings
    /// and pending requests.
    pub rows: Vec<UnwindRow>,
    pub mappings: HashMap<u32, ProcessMappings>,
    /// The files' tables published, for processes not published yet.
    pub files: HashMap<FileKey, FileTable>,
    pub requests: Vec<u32>,
    /// Requests with what the kernel saw (those put back).
    pub seen_requests: Vec<(u32, ProcessSeen)>,
    /// The kernel's count of moves between cgroups.
    pub cgroup_moves: u64,
    /// The Python processes published and the code objects asked for.
    pub python: HashMap<u32, PythonProcess>,
    pub code_requests: Vec<CodeSeen>,
    /// The JVMs published.
    pub java: HashMap<u32, JavaProcess>,
    /// The Go processes published and the label sets asked for.
    pub go: HashMap<u32, GoProcess>,
    pub label_requests: Vec<LabelSetSeen>,
    /// The thread contexts published.
    pub thread_ctx: HashMap<u32, ThreadCtxProcess>,
}

/// Rows the programs record, and time that passes, within one chunk.
#[derive(Default)]
pub struct Step {
    pub rows: Vec<RawSample>,
    pub ns: u64,
}

impl MemoryKernel {
    /// Records `row` in the active slot, as a program would.
    pub fn record(&mut self, row: RawSample) {
        self.stats[Stat::OnCpuSamples as usize] += row.samples;
        self.slots[self.active].push(row);
    }

    /// Counts `n` more of `stat`, as a program would.
    pub fn count(&mut self, stat: Stat, n: u64) {
        self.stats[stat as usize] += n;
    }

    /// Lets `ns` of the kernel's clock pass.
    pub fn advance(&mut self, ns: u64) {
        self.now_ns += ns;
    }
}

/// The distinct stacks of `rows`, as the stack map would hold them.
fn stacks(rows: &[RawSample]) -> usize {
    rows.iter()
        .flat_map(|r| [&r.user_stack, &r.kernel_stack])
        .filter(|s| matches!(s, Stack::Frames(_) | Stack::Truncated(_)))
        .collect::<HashSet<_>>()
        .len()
}

impl WindowMaps for MemoryKernel {
    fn flip(&mut self) -> Result<Flip, KernelError> {
        if let Some(step) = self.script.pop_front() {
            for row in step.rows {
                self.record(row);
            }
            self.advance(step.ns);
        }
        let flip = Flip {
            slot: u32::try_from(self.active).unwrap_or(0),
            start_ns: self.last_flip_ns,
            end_ns: self.now_ns,
        };
        self.active = 1 - self.active;
        self.last_flip_ns = self.now_ns;
        self.flips += 1;
        self.flipped_at.push(tokio::time::Instant::now());
        Ok(flip)
    }

    fn drain(&mut self, flip: &Flip) -> Result<Drained, KernelError> {
        let samples = std::mem::take(&mut self.slots[flip.slot as usize]);
        let map_entries = MapEntries {
            samples: u32::try_from(samples.len()).unwrap_or(u32::MAX),
            stacks: u32::try_from(stacks(&samples)).unwrap_or(u32::MAX),
        };
        Ok(Drained {
            samples,
            stats: std::mem::take(&mut self.stats),
            unknown_entries: 0,
            map_entries,
        })
    }

    fn active_entries(&self) -> Result<MapEntries, KernelError> {
        let rows = &self.slots[self.active];
        Ok(MapEntries {
            samples: u32::try_from(rows.len()).unwrap_or(u32::MAX),
            stacks: u32::try_from(stacks(rows)).unwrap_or(u32::MAX),
        })
    }
}

impl InFlightMaps for MemoryKernel {
    fn account_in_flight(
        &mut self,
        _flip: &Flip,
        _rule: OffCpu,
        _target: &Target,
        _rng: &mut Rng,
    ) -> Result<(Vec<RawSample>, InFlightStats), KernelError> {
        let stats = InFlightStats {
            tracked: self.open.len() as u64,
            untracked: 0,
        };
        Ok((self.open.clone(), stats))
    }
}

impl TargetMaps for MemoryKernel {
    fn target_pids(&mut self) -> Result<Vec<u32>, KernelError> {
        Ok(self.targets.iter().copied().collect())
    }

    fn add_target(&mut self, pid: u32) -> Result<(), KernelError> {
        self.targets.insert(pid);
        Ok(())
    }

    fn remove_target(&mut self, pid: u32) -> Result<(), KernelError> {
        self.targets.remove(&pid);
        Ok(())
    }
}

impl UnwindMaps for MemoryKernel {
    type Error = KernelError;

    fn write_rows(&mut self, start: u32, rows: &[UnwindRow]) -> Result<(), KernelError> {
        let start = start as usize;
        self.rows[start..start + rows.len()].copy_from_slice(rows);
        Ok(())
    }

    fn set_mappings(&mut self, pid: u32, mappings: &ProcessMappings) -> Result<(), KernelError> {
        self.mappings.insert(pid, *mappings);
        Ok(())
    }

    fn remove_mappings(&mut self, pid: u32) -> Result<(), KernelError> {
        self.mappings.remove(&pid);
        Ok(())
    }

    fn set_file_table(&mut self, key: &FileKey, table: &FileTable) -> Result<(), KernelError> {
        self.files.insert(*key, *table);
        Ok(())
    }

    fn remove_file_table(&mut self, key: &FileKey) -> Result<(), KernelError> {
        self.files.remove(key);
        Ok(())
    }

    fn take_requests(&mut self) -> Result<Vec<(u32, ProcessSeen)>, KernelError> {
        Ok(std::mem::take(&mut self.requests)
            .into_iter()
            .map(|pid| (pid, ProcessSeen::default()))
            .chain(std::mem::take(&mut self.seen_requests))
            .collect())
    }

    fn put_back(&mut self, requests: &[(u32, ProcessSeen)]) -> Result<(), KernelError> {
        for &(pid, seen) in requests {
            let asked = |&(p, _): &(u32, ProcessSeen)| p == pid;
            if !self.requests.contains(&pid) && !self.seen_requests.iter().any(asked) {
                self.seen_requests.push((pid, seen));
            }
        }
        Ok(())
    }

    fn request(&mut self, pid: u32) -> Result<(), KernelError> {
        if !self.requests.contains(&pid) {
            self.requests.push(pid);
        }
        Ok(())
    }

    fn cgroup_moves(&mut self) -> Result<u64, KernelError> {
        Ok(self.cgroup_moves)
    }
}

impl PythonMaps for MemoryKernel {
    fn set_python(&mut self, pid: u32, process: &PythonProcess) -> Result<(), KernelError> {
        self.python.insert(pid, *process);
        Ok(())
    }

    fn remove_python(&mut self, pid: u32) -> Result<(), KernelError> {
        self.python.remove(&pid);
        Ok(())
    }

    fn take_code_requests(&mut self) -> Result<Vec<CodeSeen>, KernelError> {
        Ok(std::mem::take(&mut self.code_requests))
    }
}

impl GoMaps for MemoryKernel {
    fn set_go(&mut self, pid: u32, process: &GoProcess) -> Result<(), KernelError> {
        self.go.insert(pid, *process);
        Ok(())
    }

    fn remove_go(&mut self, pid: u32) -> Result<(), KernelError> {
        self.go.remove(&pid);
        Ok(())
    }

    fn take_label_requests(&mut self) -> Result<Vec<LabelSetSeen>, KernelError> {
        Ok(std::mem::take(&mut self.label_requests))
    }
}

impl ThreadCtxMaps for MemoryKernel {
    fn set_thread_ctx(&mut self, pid: u32, process: ThreadCtxProcess) -> Result<(), KernelError> {
        self.thread_ctx.insert(pid, process);
        Ok(())
    }

    fn remove_thread_ctx(&mut self, pid: u32) -> Result<(), KernelError> {
        self.thread_ctx.remove(&pid);
        Ok(())
    }
}

impl JavaMaps for MemoryKernel {
    fn set_java(&mut self, pid: u32, process: &JavaProcess) -> Result<(), KernelError> {
        self.java.insert(pid, *process);
        Ok(())
    }

    fn remove_java(&mut self, pid: u32) -> Result<(), KernelError> {
        self.java.remove(&pid);
        Ok(())
    }

    fn take_frame_requests(&mut self) -> Result<Vec<FrameSeen>, KernelError> {
        Ok(Vec::new())
    }
}

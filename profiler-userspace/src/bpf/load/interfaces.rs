//! The [`Kernel`]'s map interfaces, each served by the part that owns
//! its maps.
use profiler_common::{
    go::{GoProcess, LabelSetSeen},
    java::{FrameSeen, JavaProcess},
    process::ProcessSeen,
    python::{CodeSeen, PythonProcess},
    runtimes::Runtimes,
    thread_ctx::ThreadCtxProcess,
    unwind::{
        ProcessMappings, UnwindRow,
        by_file::{FileKey, FileTable},
    },
};

use super::Kernel;
use crate::{
    bpf::{
        drain::{Drained, Flip, WindowMaps},
        error::KernelError,
        go_maps::{GoMaps, GoWakeLookup},
        in_flight::{InFlightMaps, InFlightStats},
        java_maps::JavaMaps,
        python_maps::PythonMaps,
        rng::Rng,
        targets::TargetMaps,
        thread_ctx_maps::ThreadCtxMaps,
        unwind_maps::UnwindMaps,
    },
    config::{OffCpu, Target},
    sample::{MapEntries, RawSample},
};

impl WindowMaps for Kernel {
    fn flip(&mut self) -> Result<Flip, KernelError> {
        self.windows.flip()
    }

    fn drain(&mut self, flip: &Flip) -> Result<Drained, KernelError> {
        self.windows.drain(flip)
    }

    fn active_entries(&self) -> Result<MapEntries, KernelError> {
        self.windows.active_entries()
    }
}

impl TargetMaps for Kernel {
    fn target_pids(&mut self) -> Result<Vec<u32>, KernelError> {
        self.targets.target_pids()
    }

    fn add_target(&mut self, pid: u32) -> Result<(), KernelError> {
        self.targets.add_target(pid)
    }

    fn remove_target(&mut self, pid: u32) -> Result<(), KernelError> {
        self.targets.remove_target(pid)
    }
}

impl InFlightMaps for Kernel {
    fn account_in_flight(
        &mut self,
        flip: &Flip,
        rule: OffCpu,
        target: &Target,
        rng: &mut Rng,
    ) -> Result<(Vec<RawSample>, InFlightStats), KernelError> {
        self.in_flight.account_in_flight(flip, rule, target, rng)
    }
}

impl UnwindMaps for Kernel {
    type Error = KernelError;

    fn write_rows(&mut self, start: u32, rows: &[UnwindRow]) -> Result<(), KernelError> {
        self.unwind.write_rows(start, rows)
    }

    fn set_mappings(&mut self, pid: u32, mappings: &ProcessMappings) -> Result<(), KernelError> {
        self.unwind.set_mappings(pid, mappings)
    }

    fn remove_mappings(&mut self, pid: u32) -> Result<(), KernelError> {
        self.unwind.remove_mappings(pid)
    }

    fn set_file_table(&mut self, key: &FileKey, table: &FileTable) -> Result<(), KernelError> {
        self.unwind.set_file_table(key, table)
    }

    fn remove_file_table(&mut self, key: &FileKey) -> Result<(), KernelError> {
        self.unwind.remove_file_table(key)
    }

    fn take_requests(&mut self) -> Result<Vec<(u32, ProcessSeen)>, KernelError> {
        self.unwind.take_requests()
    }

    fn request(&mut self, pid: u32) -> Result<(), KernelError> {
        self.unwind.request(pid)
    }

    fn put_back(&mut self, requests: &[(u32, ProcessSeen)]) -> Result<(), KernelError> {
        self.unwind.put_back(requests)
    }

    fn cgroup_moves(&mut self) -> Result<u64, KernelError> {
        self.unwind.cgroup_moves()
    }
}

impl PythonMaps for Kernel {
    fn set_python(&mut self, pid: u32, process: &PythonProcess) -> Result<(), KernelError> {
        self.python.set_python(pid, process)?;
        self.runtime_procs.add(pid, Runtimes::PYTHON)
    }

    fn remove_python(&mut self, pid: u32) -> Result<(), KernelError> {
        self.runtime_procs.remove(pid, Runtimes::PYTHON)?;
        self.python.remove_python(pid)
    }

    fn take_code_requests(&mut self) -> Result<Vec<CodeSeen>, KernelError> {
        self.python.take_code_requests()
    }
}

impl GoMaps for Kernel {
    fn set_go(&mut self, pid: u32, process: &GoProcess) -> Result<(), KernelError> {
        self.go.set_go(pid, process)?;
        self.runtime_procs.add(pid, Runtimes::GO)
    }

    fn remove_go(&mut self, pid: u32) -> Result<(), KernelError> {
        self.runtime_procs.remove(pid, Runtimes::GO)?;
        self.go.remove_go(pid)
    }

    fn take_label_requests(&mut self) -> Result<Vec<LabelSetSeen>, KernelError> {
        self.go.take_label_requests()
    }

    fn probe_ready(
        &mut self,
        exe: &std::path::Path,
        offset: u64,
        binary: &GoProcess,
    ) -> Result<(), KernelError> {
        let index = self.go.stage_binary(binary)?;
        self.attach_go_ready(exe, offset, index)?;
        self.go.binary_probed();
        Ok(())
    }

    fn go_wakes(&mut self) -> Option<std::sync::Arc<dyn GoWakeLookup>> {
        self.go.take_wakes()
    }
}

impl ThreadCtxMaps for Kernel {
    fn set_thread_ctx(&mut self, pid: u32, process: ThreadCtxProcess) -> Result<(), KernelError> {
        self.thread_ctx.set_thread_ctx(pid, process)?;
        self.runtime_procs.add(pid, Runtimes::THREAD_CTX)
    }

    fn remove_thread_ctx(&mut self, pid: u32) -> Result<(), KernelError> {
        self.runtime_procs.remove(pid, Runtimes::THREAD_CTX)?;
        self.thread_ctx.remove_thread_ctx(pid)
    }
}

#[cfg(test)]
impl Kernel {
    /// Which runtimes' maps hold `pid`, as `RUNTIME_PROCS` says.
    pub(in crate::bpf) fn runtimes_of(&mut self, pid: u32) -> Result<Runtimes, KernelError> {
        self.runtime_procs.of_pid(pid)
    }
}

impl JavaMaps for Kernel {
    fn set_java(&mut self, pid: u32, process: &JavaProcess) -> Result<(), KernelError> {
        self.java.set_java(pid, process)?;
        self.runtime_procs.add(pid, Runtimes::JAVA)
    }

    fn remove_java(&mut self, pid: u32) -> Result<(), KernelError> {
        self.runtime_procs.remove(pid, Runtimes::JAVA)?;
        self.java.remove_java(pid)
    }

    fn take_frame_requests(&mut self) -> Result<Vec<FrameSeen>, KernelError> {
        self.java.take_frame_requests()
    }
}

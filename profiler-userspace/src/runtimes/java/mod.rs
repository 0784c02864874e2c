//! HotSpot JVMs, read from outside with no agent and no JVM flag: the
//! kernel walk records Java frames where a PC is in a JVM's code cache
//! (`profiler-ebpf`'s `java.rs`, types in `profiler_common::java`), and
//! this module gives it what it needs and names what it records.
//!
//! - `binary.rs` recognises a `libjvm.so` (once per file) by the tables
//!   it exports; `vm_structs.rs` reads them from the process, and
//!   `layout.rs` takes every offset used from them.
//! - [`Java::publish`] tells the walk, per process, where the code cache's
//!   heaps and segment maps are (`code_cache.rs`), when the unwinder reads
//!   the process's mappings; a JVM still starting is tried again at each
//!   poll until its code cache is set up.
//! - The symbolizer names the frames (`methods.rs`) through the
//!   [`JavaVm`]s published, which go with each chunk.
//!
//! A JVM whose tables lack something read is named once in the log; its
//! processes keep native frames.
mod binary;
mod code_cache;
mod layout;
mod methods;
mod scopes;
mod vm_structs;

use std::{collections::HashMap, sync::Arc};

pub use binary::{Jvm, recognise};
pub use layout::{Layout, NameLayout};
pub use methods::{JavaFrame, JavaMethod, Namer};
pub use vm_structs::VmStructs;

use crate::{
    bpf::{JavaMaps, KernelError},
    process::maps::{FileStamp, Vma, map_files_path},
    runtimes::remote::Memory,
};

/// Polls a JVM still starting is tried at before it is given up.
const STARTING_TRIES: u32 = 600;

/// A JVM process published to the walk, for the symbolizer.
#[derive(Debug)]
pub struct JavaVm {
    pub pid: u32,
    pub names: NameLayout,
}

/// What reading JVMs counted (a profile's comments).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JavaStats {
    /// Processes published as JVMs.
    pub processes: u64,
    /// JVMs whose tables or code cache could not be read.
    pub unreadable: u64,
}

impl JavaStats {
    /// The counters as profile comments.
    #[must_use]
    pub fn comments(&self) -> Vec<String> {
        vec![
            format!("java_processes: {}", self.processes),
            format!("java_processes_unreadable: {}", self.unreadable),
        ]
    }
}

/// A JVM found in a process whose code cache is not set up yet.
struct Starting {
    jvm: Arc<Jvm>,
    stamp: FileStamp,
    bias: u64,
    tries: u32,
}

/// The daemon's side of the Java walk.
#[derive(Default)]
pub struct Java {
    /// JVMs by file, recognised once (`None`: not one).
    binaries: HashMap<FileStamp, Option<Arc<Jvm>>>,
    /// Layouts by file, read from the first of its processes (`None`: one
    /// this build cannot read).
    layouts: HashMap<FileStamp, Option<Layout>>,
    published: HashMap<u32, FileStamp>,
    starting: HashMap<u32, Starting>,
    /// Published since the last [`Java::take_vms`].
    vms: Vec<Arc<JavaVm>>,
    stats: JavaStats,
}

impl Java {
    /// Publishes `pid` as a JVM if one of its `mappings` (as the unwinder
    /// read them, each with its file's stamp) is a `libjvm.so`, and
    /// forgets it otherwise (it exec'd into something else).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn publish(
        &mut self,
        maps: &mut impl JavaMaps,
        pid: u32,
        mappings: &[(&Vma, Option<FileStamp>)],
    ) -> Result<(), KernelError> {
        let found = mappings
            .iter()
            .filter(|(vma, _)| vma.path.contains("libjvm"))
            .find_map(|&(vma, stamp)| {
                let stamp = stamp?;
                let jvm = self.jvm(pid, vma, stamp)?;
                Some((jvm.bias(vma.offset, vma.start)?, jvm, stamp))
            });
        self.starting.remove(&pid);
        let Some((bias, jvm, stamp)) = found else {
            return self.forget(maps, pid);
        };
        self.starting.insert(
            pid,
            Starting {
                jvm,
                stamp,
                bias,
                tries: 0,
            },
        );
        self.try_starting(maps, pid)
    }

    /// Tries the JVMs still starting again (every poll).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn serve(&mut self, maps: &mut impl JavaMaps) -> Result<(), KernelError> {
        let pids: Vec<u32> = self.starting.keys().copied().collect();
        for pid in pids {
            self.try_starting(maps, pid)?;
        }
        Ok(())
    }

    /// Forgets `pid`, which exited or exec'd.
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn forget(&mut self, maps: &mut impl JavaMaps, pid: u32) -> Result<(), KernelError> {
        self.starting.remove(&pid);
        if self.published.remove(&pid).is_some() {
            maps.remove_java(pid)?;
        }
        Ok(())
    }

    /// The JVMs published since the last call, for the next chunk.
    pub fn take_vms(&mut self) -> Vec<Arc<JavaVm>> {
        std::mem::take(&mut self.vms)
    }

    #[must_use]
    pub fn stats(&self) -> JavaStats {
        self.stats
    }

    /// Reads the tables and code cache of starting JVM `pid` and publishes
    /// it once they are set up; gives up on it after [`STARTING_TRIES`].
    fn try_starting(&mut self, maps: &mut impl JavaMaps, pid: u32) -> Result<(), KernelError> {
        let Some(starting) = self.starting.get_mut(&pid) else {
            return Ok(());
        };
        starting.tries += 1;
        let memory = Memory { pid };
        let (stamp, bias) = (starting.stamp, starting.bias);
        let layout = match self.layouts.get(&stamp) {
            Some(Some(layout)) => *layout,
            Some(None) => {
                self.starting.remove(&pid);
                return Ok(());
            }
            None => match VmStructs::read(memory, &starting.jvm, bias) {
                Ok(tables) => {
                    let layout = Layout::of(&tables, jdk_major(memory, &tables))
                        .inspect_err(|e| {
                            tracing::info!(
                                "a JVM (pid {pid}): {e}; its processes show native frames"
                            );
                        })
                        .ok();
                    self.layouts.insert(stamp, layout);
                    let Some(layout) = layout else {
                        self.starting.remove(&pid);
                        return Ok(());
                    };
                    layout
                }
                Err(e) => {
                    self.not_yet(pid, &e);
                    return Ok(());
                }
            },
        };
        match code_cache::read(memory, &layout) {
            Ok(process) => {
                self.starting.remove(&pid);
                maps.set_java(pid, &process)?;
                self.published.insert(pid, stamp);
                self.stats.processes += 1;
                self.vms.push(Arc::new(JavaVm {
                    pid,
                    names: layout.names,
                }));
            }
            Err(e) => self.not_yet(pid, &e),
        }
        Ok(())
    }

    /// A starting JVM not readable yet: tried again at the next poll, or
    /// given up (counted) after [`STARTING_TRIES`].
    fn not_yet(&mut self, pid: u32, why: &dyn std::error::Error) {
        let Some(starting) = self.starting.get(&pid) else {
            return;
        };
        if starting.tries >= STARTING_TRIES {
            tracing::debug!(pid, "a JVM not read: {}", crate::error_chain(why));
            self.starting.remove(&pid);
            self.stats.unreadable += 1;
        }
    }

    /// The JVM in the file `vma` of `pid` maps, recognised once per file.
    fn jvm(&mut self, pid: u32, vma: &Vma, stamp: FileStamp) -> Option<Arc<Jvm>> {
        if let Some(known) = self.binaries.get(&stamp) {
            return known.clone();
        }
        let file = std::fs::File::open(map_files_path(pid, vma)).ok()?;
        // SAFETY: the file is only read, here; a library is replaced by
        // rename on upgrade, which leaves this mapping intact.
        let data = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        let read = recognise(&data).map(Arc::new);
        self.binaries.insert(stamp, read.clone());
        read
    }
}

/// The JDK's major version (`Abstract_VM_Version::_vm_major_version`);
/// 0 when it cannot be read.
fn jdk_major(memory: Memory, tables: &VmStructs) -> u32 {
    let mut bytes = [0u8; 4];
    tables
        .address("Abstract_VM_Version", "_vm_major_version")
        .and_then(|at| memory.read(at, &mut bytes).ok())
        .map_or(0, |()| u32::from_le_bytes(bytes))
}

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
//! - Java frames are named while the JVM runs: each one the walk records
//!   for the first time at once (it asks, and rings the daemon:
//!   [`Java::serve`]), and each chunk's for its window (`naming.rs`, with
//!   `methods.rs` and `scopes.rs`); the names go with the chunk to the
//!   symbolizer. What a JVM's methods and compilations read is kept while
//!   the last ten windows asked for it (`aged.rs`).
//!
//! A JVM whose tables lack something read is named once in the log; its
//! processes keep native frames.
mod aged;
mod binary;
mod code_cache;
mod flags;
mod layout;
mod methods;
mod naming;
mod scopes;
mod vm_structs;

use std::{collections::HashMap, sync::Arc};

pub use binary::{Jvm, recognise};
pub use layout::{Layout, NameLayout};
pub use methods::{JavaFrame, JavaMethod, Namer};
pub use naming::NamedFrame;
pub use vm_structs::VmStructs;

use naming::Naming;

use super::file_memo::FileMemo;
use crate::{
    bpf::{JavaMaps, KernelError},
    process::maps::{FileStamp, Vma},
    process::memory::Memory,
    sample::RawSample,
};

/// Polls a JVM still starting is tried at before it is given up.
const STARTING_TRIES: u32 = 600;

/// What reading JVMs counted (a profile's comments).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JavaStats {
    /// Processes published as JVMs.
    pub processes: u64,
    /// JVMs whose tables or code cache could not be read.
    pub unreadable: u64,
    /// Java frames named, and frames whose compilation or method was gone
    /// (or unreadable) when read: `[unknown Java method]`.
    pub frames_named: u64,
    pub frames_unnamed: u64,
    /// Frames asked of a JVM no longer followed: left unnamed.
    pub frames_jvm_gone: u64,
}

impl JavaStats {
    /// The counters as profile comments.
    #[must_use]
    pub fn comments(&self) -> Vec<String> {
        vec![
            format!("java_processes: {}", self.processes),
            format!("java_processes_unreadable: {}", self.unreadable),
            format!("java_frames_named: {}", self.frames_named),
            format!("java_frames_unnamed: {}", self.frames_unnamed),
            format!("java_frames_jvm_gone: {}", self.frames_jvm_gone),
        ]
    }
}

/// A JVM published to the walk.
struct Published {
    /// Its `libjvm.so`, and its JDK's major version.
    stamp: FileStamp,
    major: u32,
    /// Whether it runs with `-XX:+DebugNonSafepoints` (`None`: unknown).
    debug_non_safepoints: Option<bool>,
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
    binaries: FileMemo<Option<Arc<Jvm>>>,
    /// Layouts by file, read from the first of its processes (`None`: one
    /// this build cannot read); bounded as `binaries` is.
    layouts: FileMemo<Option<Layout>>,
    published: HashMap<u32, Published>,
    starting: HashMap<u32, Starting>,
    naming: Naming,
    /// Frames named as the walk asked, since the last [`Java::name`].
    named: Vec<Arc<NamedFrame>>,
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
    ) -> Result<bool, KernelError> {
        let found = mappings
            .iter()
            .filter(|(vma, _)| vma.path.contains("libjvm"))
            .find_map(|&(vma, stamp)| {
                let stamp = stamp?;
                let jvm = self.jvm(pid, vma, stamp)?;
                Some((jvm.bias(vma.offset, vma.start)?, jvm, stamp))
            });
        let Some((bias, jvm, stamp)) = found else {
            return self.forget(maps, pid).map(|()| false);
        };
        // Its mappings change as the JVM commits memory: once published,
        // the same JVM stays so (its code heaps are reserved at start).
        if self.published.get(&pid).is_some_and(|p| p.stamp == stamp) {
            return Ok(true);
        }
        if self.starting.get(&pid).is_some_and(|s| s.stamp == stamp) {
            return self.try_starting(maps, pid).map(|()| true);
        }
        self.starting.insert(
            pid,
            Starting {
                jvm,
                stamp,
                bias,
                tries: 0,
            },
        );
        self.try_starting(maps, pid).map(|()| true)
    }

    /// Tries the JVMs still starting again, and names the frames the walk
    /// recorded for the first time (every poll, and when rung).
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn serve(&mut self, maps: &mut impl JavaMaps) -> Result<(), KernelError> {
        let pids: Vec<u32> = self.starting.keys().copied().collect();
        for pid in pids {
            self.try_starting(maps, pid)?;
        }
        let seen = maps.take_frame_requests()?;
        self.naming.name_seen(&seen, &mut self.named);
        Ok(())
    }

    /// Forgets `pid`, which exited or exec'd.
    ///
    /// # Errors
    /// When the kernel map cannot be written.
    pub fn forget(&mut self, maps: &mut impl JavaMaps, pid: u32) -> Result<(), KernelError> {
        self.starting.remove(&pid);
        self.naming.forget(pid);
        if self.published.remove(&pid).is_some() {
            maps.remove_java(pid)?;
        }
        Ok(())
    }

    /// The frames named as the walk asked since the last call, and those
    /// of `samples` (a chunk's) not named yet in this window.
    pub fn name(&mut self, samples: &[RawSample]) -> Vec<Arc<NamedFrame>> {
        let mut names = std::mem::take(&mut self.named);
        names.extend(self.naming.name(samples));
        names
    }

    /// A new window: its frames are named for it again.
    pub fn new_window(&mut self) {
        self.naming.new_window();
    }

    #[must_use]
    pub fn stats(&self) -> JavaStats {
        JavaStats {
            frames_named: self.naming.frames_named,
            frames_unnamed: self.naming.frames_unnamed,
            frames_jvm_gone: self.naming.frames_jvm_gone,
            ..self.stats
        }
    }

    /// The counters, and a line per JVM published that says how exact its
    /// leaf frames are, as profile comments.
    #[must_use]
    pub fn comments(&self) -> Vec<String> {
        let mut comments = self.stats().comments();
        let mut pids: Vec<&u32> = self.published.keys().collect();
        pids.sort_unstable();
        for pid in pids {
            let p = &self.published[pid];
            let exact = match p.debug_non_safepoints {
                Some(true) => "on: leaf frames' inlining and lines are exact",
                Some(false) => {
                    "off: a leaf frame between recorded points takes the next one's \
                     inlining and line"
                }
                None => "unknown",
            };
            comments.push(format!(
                "java_process {pid}: JDK {}, DebugNonSafepoints {exact}",
                p.major
            ));
        }
        comments
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
            Some(Some(layout)) => layout,
            Some(None) => {
                self.starting.remove(&pid);
                return Ok(());
            }
            None => match VmStructs::read(memory, &starting.jvm, bias) {
                Ok(tables) => {
                    let layout = Layout::of(&tables, jdk_major(memory, &tables), bias)
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
        match code_cache::read(memory, &layout, bias) {
            Ok(process) => {
                self.starting.remove(&pid);
                maps.set_java(pid, &process)?;
                let debug_non_safepoints = layout
                    .flags
                    .and_then(|f| flags::bool_flag(memory, &f, bias, "DebugNonSafepoints"));
                self.published.insert(
                    pid,
                    Published {
                        stamp,
                        major: layout.major,
                        debug_non_safepoints,
                    },
                );
                self.stats.processes += 1;
                self.naming
                    .add(pid, layout.names, debug_non_safepoints == Some(true));
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

    /// Files remembered (whether JVMs or not).
    #[must_use]
    pub fn binaries_cached(&self) -> usize {
        self.binaries.len()
    }

    /// Whether the file `vma` maps (`stamp`) is no JVM's: not a
    /// `libjvm`, or read and found not to be one.
    #[must_use]
    pub fn known_not(&self, vma: &Vma, stamp: &FileStamp) -> bool {
        !vma.path.contains("libjvm") || self.binaries.known_not(stamp)
    }

    /// The JVM in the file `vma` of `pid` maps, recognised once per file.
    fn jvm(&mut self, pid: u32, vma: &Vma, stamp: FileStamp) -> Option<Arc<Jvm>> {
        self.binaries
            .get_or_map(pid, vma, stamp, |data| recognise(data).map(Arc::new))
            .flatten()
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

#[cfg(test)]
mod tests;

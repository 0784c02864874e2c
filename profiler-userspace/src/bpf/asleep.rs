//! Threads asleep since before the programs were attached: the kernel has
//! never seen them switch, so at each window's end their time is read from
//! `/proc`. While they sleep on, neither their name nor their kernel stack
//! can change, so both are read once, not at every window's end. Also the
//! `/proc` readers that find them: the targets' threads, and their state.
use std::{collections::HashMap, sync::Arc};

use profiler_common::sample::ThreadState;

use crate::{config::Target, procfs, sample::Stack};

/// What was read of each such thread, by tid.
#[derive(Default)]
pub struct Asleep {
    threads: HashMap<u32, Known>,
}

struct Known {
    name: String,
    /// Read when first needed: the sampling rule may drop the part.
    stack: Option<Stack>,
    /// Looked at in the window being ended.
    seen: bool,
}

impl Asleep {
    /// The name of thread `tid` of process `pid`.
    pub fn name(&mut self, pid: u32, tid: u32) -> String {
        let known = self.threads.entry(tid).or_insert_with(|| Known {
            name: procfs::comm(pid, tid).unwrap_or_default(),
            stack: None,
            seen: false,
        });
        known.seen = true;
        known.name.clone()
    }

    /// Its kernel stack by function name, leaf first.
    pub fn kernel_stack(&mut self, pid: u32, tid: u32) -> Stack {
        match self.threads.get_mut(&tid) {
            Some(known) => known
                .stack
                .get_or_insert_with(|| kernel_stack(pid, tid))
                .clone(),
            None => kernel_stack(pid, tid),
        }
    }

    /// Forgets the threads not looked at in this window: they ran (the
    /// kernel tracks them now) or exited.
    pub fn end_window(&mut self) {
        self.threads
            .retain(|_, known| std::mem::take(&mut known.seen));
    }
}

/// A blocked thread's kernel stack by function name, leaf first.
pub fn kernel_stack(pid: u32, tid: u32) -> Stack {
    match procfs::kernel_stack(pid, tid) {
        Some(names) if !names.is_empty() => Stack::Named(Arc::from(names)),
        _ => Stack::Absent,
    }
}

/// (pid, tid) of every thread of the targets.
pub(super) fn target_threads(target: &Target) -> Vec<(u32, u32)> {
    let pids: Vec<u32> = match target {
        Target::Pids(pids) => pids.clone(),
        Target::All => procfs::pids(),
    };
    pids.into_iter()
        .flat_map(|pid| procfs::tids(pid).into_iter().map(move |tid| (pid, tid)))
        .collect()
}

/// The thread's state if it is off the CPU, blocked: S (or I, an idle
/// kernel thread) is sleeping, D is disk.
pub(super) fn sleeping_state(pid: u32, tid: u32) -> Option<ThreadState> {
    match procfs::thread_state(pid, tid)? {
        'S' | 'I' => Some(ThreadState::Sleeping),
        'D' => Some(ThreadState::Disk),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_is_read_once_while_seen_and_again_once_forgotten() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let sleeper = std::thread::Builder::new()
            .name("asleep-before".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                tx.send(unsafe { libc::gettid() }).unwrap();
                let _ = done_rx.recv();
            })
            .unwrap();
        let tid = u32::try_from(rx.recv().unwrap()).unwrap();
        let pid = std::process::id();
        let mut asleep = Asleep::default();
        assert_eq!(asleep.name(pid, tid), "asleep-before");
        let stack = asleep.kernel_stack(pid, tid);

        std::fs::write(format!("/proc/{pid}/task/{tid}/comm"), "asleep-after").unwrap();
        asleep.end_window();
        assert_eq!(asleep.name(pid, tid), "asleep-before", "read once");
        assert_eq!(asleep.kernel_stack(pid, tid), stack);

        asleep.end_window();
        asleep.end_window();
        assert_eq!(
            asleep.name(pid, tid),
            "asleep-after",
            "forgotten, read again"
        );
        done_tx.send(()).unwrap();
        sleeper.join().unwrap();
    }

    #[test]
    fn own_threads_are_listed_and_a_sleeper_is_seen_sleeping() {
        let pid = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel();
        let sleeper = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(500));
        });
        let tid = u32::try_from(rx.recv().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(target_threads(&Target::Pids(vec![pid])).contains(&(pid, tid)));
        assert_eq!(sleeping_state(pid, tid), Some(ThreadState::Sleeping));
        sleeper.join().unwrap();
    }
}

//! Threads asleep since before the programs were attached: the kernel has
//! never seen them switch, so at each window's end their time is read from
//! `/proc`. While they sleep on, neither their name nor their kernel stack
//! can change, so both are read once, not at every window's end. Nor do
//! they need looking up in the kernel again while they have not run: their
//! `schedstat` (time on the CPU, time waiting for it, times run) stays
//! the same, and one read of it tells. Also the `/proc` readers that find
//! them: the targets' threads, and their state.
use std::{collections::HashMap, sync::Arc};

use profiler_common::sample::ThreadState;

use crate::{process::procfs, sample::Stack};

/// What was read of each such thread, by tid.
#[derive(Default)]
pub struct Asleep {
    threads: HashMap<u32, Known>,
    /// Processes each of whose threads (listed) was found asleep and
    /// untracked in the window being ended, and in the one before.
    processes: HashMap<u32, Vec<u32>>,
    next_processes: HashMap<u32, Vec<u32>>,
}

struct Known {
    name: String,
    /// Read when first needed: the sampling rule may drop the part.
    stack: Option<Stack>,
    /// Its `schedstat` when it was found untracked and asleep, and that
    /// state: while the line is the same, it has not run since.
    still: Option<(String, ThreadState)>,
    /// Looked at in the window being ended.
    seen: bool,
}

impl Asleep {
    /// The name of thread `tid` of process `pid`.
    pub fn name(&mut self, pid: u32, tid: u32) -> String {
        self.known(pid, tid).name.clone()
    }

    fn known(&mut self, pid: u32, tid: u32) -> &mut Known {
        let known = self.threads.entry(tid).or_insert_with(|| Known {
            name: procfs::comm(pid, tid).unwrap_or_default(),
            stack: None,
            still: None,
            seen: false,
        });
        known.seen = true;
        known
    }

    /// The state of thread `tid` if it has not run since it was found
    /// untracked and asleep in it ([`Asleep::found`]): then it still is
    /// both, with no lookup in the kernel nor read of its state.
    pub fn still_asleep(&mut self, pid: u32, tid: u32) -> Option<ThreadState> {
        let known = self.threads.get_mut(&tid)?;
        let (line, state) = known.still.as_ref()?;
        if procfs::schedstat(pid, tid).as_ref() != Some(line) {
            known.still = None;
            return None;
        }
        known.seen = true;
        Some(*state)
    }

    /// The threads of process `pid`, and their states, if each was asleep
    /// and untracked at the last window's end ([`Asleep::whole_process`])
    /// and none has run since.
    pub fn process_still_asleep(&mut self, pid: u32) -> Option<Vec<(u32, ThreadState)>> {
        let tids = self.processes.remove(&pid)?;
        let states = tids
            .iter()
            .map(|&tid| Some((tid, self.still_asleep(pid, tid)?)))
            .collect::<Option<Vec<_>>>()?;
        self.next_processes.insert(pid, tids);
        Some(states)
    }

    /// Every thread of process `pid`, `tids`, is asleep and untracked, and
    /// known to be until it runs.
    pub fn whole_process(&mut self, pid: u32, tids: Vec<u32>) {
        self.next_processes.insert(pid, tids);
    }

    /// Thread `tid`, looked up and found untracked, was then read asleep
    /// in `state`. Its `schedstat`, read now, is kept for
    /// [`Asleep::still_asleep`] if `untracked` (a second lookup, after the
    /// read) says it is still untracked: it did not run and switch out
    /// before the read, so any run from here on changes the line. Returns
    /// whether it was kept.
    ///
    /// # Errors
    /// `untracked`'s.
    pub fn found<E>(
        &mut self,
        pid: u32,
        tid: u32,
        state: ThreadState,
        untracked: impl FnOnce() -> Result<bool, E>,
    ) -> Result<bool, E> {
        let line = procfs::schedstat(pid, tid).filter(|line| ran_at_all(line));
        let still = match line {
            Some(line) if untracked()? => Some((line, state)),
            _ => None,
        };
        let kept = still.is_some();
        self.known(pid, tid).still = still;
        Ok(kept)
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
        self.processes = std::mem::take(&mut self.next_processes);
    }
}

/// Whether a `schedstat` line counts anything: without the scheduler's
/// accounting (`CONFIG_SCHED_INFO`) it reads "0 0 0" and tells nothing.
fn ran_at_all(line: &str) -> bool {
    line.split_whitespace().any(|field| field != "0")
}

/// A blocked thread's kernel stack by function name, leaf first.
pub fn kernel_stack(pid: u32, tid: u32) -> Stack {
    match procfs::kernel_stack(pid, tid) {
        Some(names) if !names.is_empty() => Stack::Named(Arc::from(names)),
        _ => Stack::Absent,
    }
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
        assert!(procfs::tids(pid).contains(&tid));
        assert_eq!(sleeping_state(pid, tid), Some(ThreadState::Sleeping));
        sleeper.join().unwrap();
    }

    /// A thread found asleep and untracked is known to sleep on, with one
    /// read, until it runs; one that the second lookup finds tracked is
    /// not remembered so.
    #[test]
    fn a_sleeper_is_known_asleep_until_it_runs() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (wake_tx, wake_rx) = std::sync::mpsc::channel::<()>();
        let sleeper = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            while wake_rx.recv().is_ok() {
                std::hint::black_box((0..1000).sum::<u64>());
            }
        });
        let tid = u32::try_from(rx.recv().unwrap()).unwrap();
        let pid = std::process::id();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut asleep = Asleep::default();

        asleep
            .found(pid, tid, ThreadState::Sleeping, || Ok::<_, ()>(false))
            .unwrap();
        assert_eq!(
            asleep.still_asleep(pid, tid),
            None,
            "tracked at the second look"
        );

        asleep
            .found(pid, tid, ThreadState::Sleeping, || Ok::<_, ()>(true))
            .unwrap();
        assert_eq!(asleep.still_asleep(pid, tid), Some(ThreadState::Sleeping));
        assert_eq!(asleep.still_asleep(pid, tid), Some(ThreadState::Sleeping));

        wake_tx.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(asleep.still_asleep(pid, tid), None, "it ran");
        assert_eq!(asleep.still_asleep(pid, tid), None, "until found again");
        drop(wake_tx);
        sleeper.join().unwrap();
    }

    /// A process all of whose threads sleep is known asleep, threads and
    /// all, window after window, until one of them runs.
    #[test]
    fn a_sleeping_process_is_known_asleep_until_it_runs() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut asleep = Asleep::default();
        assert!(
            asleep
                .found(pid, pid, ThreadState::Sleeping, || Ok::<_, ()>(true))
                .unwrap()
        );
        asleep.whole_process(pid, vec![pid]);
        asleep.end_window();
        for _ in 0..2 {
            let threads = asleep.process_still_asleep(pid);
            assert_eq!(threads, Some(vec![(pid, ThreadState::Sleeping)]));
            asleep.end_window();
        }

        // Stopped and continued: it ran, to stop.
        let signal = |sig| {
            // SAFETY: kill has no memory preconditions; `pid` is our child.
            assert_eq!(unsafe { libc::kill(i32::try_from(pid).unwrap(), sig) }, 0);
        };
        signal(libc::SIGSTOP);
        signal(libc::SIGCONT);
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(asleep.process_still_asleep(pid), None);
        asleep.end_window();
        assert_eq!(
            asleep.process_still_asleep(pid),
            None,
            "listed again from now on"
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn schedstat_without_the_schedulers_accounting_tells_nothing() {
        assert!(!ran_at_all("0 0 0\n"));
        assert!(ran_at_all("294722311 109650233 1610\n"));
    }
}

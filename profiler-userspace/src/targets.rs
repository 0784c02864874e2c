//! Which processes are targets while the daemon runs: those named with
//! `--pid`, plus those found by name (`--comm`) or PID file (`--pid-file`),
//! looked for again every check so that a restarted service is picked up
//! (`--wait`).
use std::{collections::BTreeSet, fs};

use crate::{
    config::{Discover, Target},
    process::procfs,
};

/// Longest process name the kernel keeps (`TASK_COMM_LEN - 1`).
const COMM_MAX: usize = 15;

pub struct Targets {
    all: bool,
    discover: Discover,
    current: BTreeSet<u32>,
}

impl Targets {
    /// The targets at start: the `--pid` processes and what `discover`
    /// finds now.
    #[must_use]
    pub fn new(target: &Target, discover: &Discover) -> Self {
        let (all, mut current) = match target {
            Target::All => (true, BTreeSet::new()),
            Target::Pids(pids) => (false, pids.iter().copied().collect()),
        };
        current.extend(find(discover));
        Self {
            all,
            discover: discover.clone(),
            current,
        }
    }

    /// The targets as the kernel and the accounting see them.
    #[must_use]
    pub fn current(&self) -> Target {
        if self.all {
            Target::All
        } else {
            Target::Pids(self.current.iter().copied().collect())
        }
    }

    /// Whether the kernel makes targets itself: `--comm` matches, at
    /// their exec.
    #[must_use]
    pub fn kernel_adopts(&self) -> bool {
        !self.all && !self.discover.comms.is_empty()
    }

    /// Adopts the live `--comm` matches the kernel added itself at their
    /// exec (in `in_kernel`, its target set) and not followed yet; returns
    /// them. [`Self::refresh`] does too, with the rest of its look.
    pub fn adopt(&mut self, in_kernel: &[u32]) -> Vec<u32> {
        if !self.kernel_adopts() {
            return Vec::new();
        }
        let new: Vec<u32> = in_kernel
            .iter()
            .copied()
            .filter(|p| !self.current.contains(p) && procfs::alive(*p))
            .collect();
        self.current.extend(&new);
        new
    }

    /// Looks again: returns the processes that became targets and those
    /// that exited. `in_kernel` is the kernel's target set, which also
    /// holds the `--comm` matches the kernel added itself at their exec:
    /// live ones are adopted, gone ones reported as exited.
    pub fn refresh(&mut self, in_kernel: &[u32]) -> (Vec<u32>, Vec<u32>) {
        if self.all {
            return (Vec::new(), Vec::new());
        }
        let mut exited: Vec<u32> = self
            .current
            .iter()
            .copied()
            .filter(|&p| !procfs::alive(p))
            .collect();
        for pid in &exited {
            self.current.remove(pid);
        }
        let (alive, gone): (Vec<u32>, Vec<u32>) = in_kernel
            .iter()
            .copied()
            .filter(|p| !self.current.contains(p) && !exited.contains(p))
            .partition(|&p| procfs::alive(p));
        exited.extend(gone);
        let added: Vec<u32> = find(&self.discover)
            .into_iter()
            .chain(alive)
            .filter(|p| self.current.insert(*p))
            .collect();
        (added, exited)
    }

    /// Whether the run is over: no target left and none to wait for.
    #[must_use]
    pub fn all_gone(&self) -> bool {
        !self.all && self.current.is_empty() && !self.discover.wait
    }
}

/// Live processes named by `discover`'s PID files or process names.
#[must_use]
pub fn find(discover: &Discover) -> Vec<u32> {
    let mut found = BTreeSet::new();
    for path in &discover.pid_files {
        let pid = fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        if let Some(pid) = pid.filter(|&p| p != 0 && procfs::alive(p)) {
            found.insert(pid);
        }
    }
    if !discover.comms.is_empty() {
        for pid in procfs::pids() {
            let matches = procfs::comm(pid, pid)
                .is_some_and(|comm| discover.comms.iter().any(|name| same_comm(&comm, name)));
            if matches && procfs::alive(pid) {
                found.insert(pid);
            }
        }
    }
    found.into_iter().collect()
}

/// `comm` as the kernel stores it equals `name` cut to the kernel's length.
fn same_comm(comm: &str, name: &str) -> bool {
    let cut = name
        .char_indices()
        .nth(COMM_MAX)
        .map_or(name, |(i, _)| &name[..i]);
    comm == cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_as_the_kernel_cuts_them() {
        assert!(same_comm("spin_split", "spin_split"));
        assert!(same_comm("a-very-long-pro", "a-very-long-process-name"));
        assert!(!same_comm("spin", "spin_split"));
    }

    #[test]
    fn finds_by_pid_file_and_name_and_notices_exit() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let pid_file = dir.path().join("svc.pid");
        fs::write(&pid_file, format!("{pid}\n")).unwrap();
        let by_file = Discover {
            pid_files: vec![pid_file],
            ..Discover::default()
        };
        assert_eq!(find(&by_file), vec![pid]);
        let by_name = Discover {
            comms: vec!["sleep".into()],
            wait: true,
            ..Discover::default()
        };
        assert!(find(&by_name).contains(&pid));

        let mut targets = Targets::new(&Target::Pids(Vec::new()), &by_name);
        assert!(matches!(targets.current(), Target::Pids(p) if p.contains(&pid)));
        child.kill().unwrap();
        child.wait().unwrap();
        let (_, exited) = targets.refresh(&[]);
        assert!(exited.contains(&pid));
        assert!(!targets.all_gone(), "--wait keeps the run going");
    }

    #[test]
    fn adopts_what_the_kernel_added_and_reports_it_gone() {
        let mut live = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        dead.wait().unwrap();
        let mut targets = Targets::new(&Target::Pids(Vec::new()), &Discover::default());
        let (added, exited) = targets.refresh(&[live.id(), dead.id()]);
        assert_eq!(added, vec![live.id()]);
        assert_eq!(exited, vec![dead.id()]);
        assert_eq!(targets.current(), Target::Pids(vec![live.id()]));
        live.kill().unwrap();
        live.wait().unwrap();
        let (added, exited) = targets.refresh(&[live.id()]);
        assert!(added.is_empty());
        assert_eq!(exited, vec![live.id()]);
    }
}

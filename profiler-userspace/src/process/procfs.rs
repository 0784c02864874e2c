//! Small readers of `/proc`, shared by the modules that need to know about
//! processes and threads outside the kernel maps.
use std::{
    fs,
    io::{self, Read as _},
    path::Path,
};

/// The text of the `/proc` file at `path`. `fs::read_to_string` would ask
/// for the file's size first (a `statx`), which `/proc` gives as 0: one
/// system call per read for nothing, on paths read for every process.
///
/// # Errors
/// When the file cannot be opened or read, or is not UTF-8.
pub fn read(path: impl AsRef<Path>) -> io::Result<String> {
    let mut text = String::with_capacity(4096);
    // `Take` has no size hint to ask for.
    fs::File::open(path)?
        .take(u64::MAX)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// The numeric entries of a `/proc` directory: pids of `/proc`, tids of
/// `/proc/<pid>/task`.
#[must_use]
pub fn numeric_entries(dir: &str) -> Vec<u32> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// Every process id.
#[must_use]
pub fn pids() -> Vec<u32> {
    numeric_entries("/proc")
}

/// The thread ids of process `pid`.
#[must_use]
pub fn tids(pid: u32) -> Vec<u32> {
    numeric_entries(&format!("/proc/{pid}/task"))
}

/// The one-letter scheduler state of a thread (`R`, `S`, `D`, `Z`, ...),
/// from the `stat` file at `path`.
fn state_in(path: &str) -> Option<char> {
    let stat = read(path).ok()?;
    // The state follows the parenthesised name, which may contain spaces.
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// The scheduler state of thread `tid` of process `pid`.
#[must_use]
pub fn thread_state(pid: u32, tid: u32) -> Option<char> {
    state_in(&format!("/proc/{pid}/task/{tid}/stat"))
}

/// The `schedstat` line of thread `tid` of process `pid`: its time on the
/// CPU and waiting for it (ns), and how many times it ran.
#[must_use]
pub fn schedstat(pid: u32, tid: u32) -> Option<String> {
    read(format!("/proc/{pid}/task/{tid}/schedstat")).ok()
}

/// The kernel stack of thread `tid` of process `pid` (a blocked thread's,
/// from `/proc/<pid>/task/<tid>/stack`, root only) by function name, leaf
/// first; `None` when it cannot be read.
#[must_use]
pub fn kernel_stack(pid: u32, tid: u32) -> Option<Vec<String>> {
    let text = read(format!("/proc/{pid}/task/{tid}/stack")).ok()?;
    Some(text.lines().filter_map(parse_stack_line).collect())
}

/// `[<0>] hrtimer_nanosleep+0x74/0xf0` → `hrtimer_nanosleep`.
fn parse_stack_line(line: &str) -> Option<String> {
    let frame = line.split_once("] ")?.1;
    let name = frame.split('+').next()?.trim();
    (!name.is_empty()).then(|| name.to_owned())
}

/// Whether process (or thread) `pid` exists, exited or not: what a
/// `/proc/PID` lookup tells, by a signal-0 `kill` (a pid lookup, no path
/// walk and no dentry: several times cheaper, and the daemon asks it of
/// every process it knows at every poll).
#[must_use]
pub fn exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing: the call only checks that `pid`
    // exists and may be signalled.
    let ret = unsafe { libc::kill(pid, 0) };
    ret == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Whether process `pid` exists and has not exited (a zombie, exited but
/// not yet reaped by its parent, counts as exited).
#[must_use]
pub fn alive(pid: u32) -> bool {
    !matches!(
        state_in(&format!("/proc/{pid}/stat")),
        Some('Z' | 'X') | None
    )
}

/// The name of process `pid` (its main thread's), or of one of its threads.
#[must_use]
pub fn comm(pid: u32, tid: u32) -> Option<String> {
    read(format!("/proc/{pid}/task/{tid}/comm"))
        .ok()
        .map(|c| c.trim_end_matches('\n').to_owned())
}

/// The id process `pid` has in its own (innermost) PID namespace.
#[must_use]
pub fn ns_pid(pid: u32) -> Option<u32> {
    let status = read(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("NStgid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

/// The running kernel's release (`uname -r`), or "unknown".
#[must_use]
pub fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".to_owned(), |r| r.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stack_lines() {
        assert_eq!(
            parse_stack_line("[<0>] hrtimer_nanosleep+0x74/0xf0").as_deref(),
            Some("hrtimer_nanosleep")
        );
        assert_eq!(parse_stack_line("garbage"), None);
    }

    #[test]
    fn this_process() {
        let pid = std::process::id();
        assert!(alive(pid));
        assert!(pids().contains(&pid));
        assert!(tids(pid).contains(&pid));
        assert!(thread_state(pid, pid).is_some());
        assert!(comm(pid, pid).is_some_and(|c| !c.is_empty()));
        assert!(!alive(u32::MAX - 1));
        assert_eq!(ns_pid(pid), Some(pid), "tests run in the root namespace");
    }

    #[test]
    fn a_zombie_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not reaped yet: a zombie once it has run.
        for _ in 0..100 {
            if thread_state(pid, pid) == Some('Z') {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(thread_state(pid, pid), Some('Z'));
        assert!(!alive(pid));
        assert!(exists(pid), "a zombie's /proc entry is there");
        child.wait().unwrap();
        assert!(!exists(pid), "reaped");
    }

    /// `exists` says what a `/proc/PID` lookup says, for processes and
    /// threads alike.
    #[test]
    fn exists_as_proc_says() {
        let pid = std::process::id();
        let tids = tids(pid);
        assert!(tids.len() > 1, "the test harness runs threads");
        for id in tids.into_iter().chain([1, 0, u32::MAX, u32::MAX >> 2]) {
            let in_proc = Path::new(&format!("/proc/{id}")).exists();
            assert_eq!(exists(id), in_proc && id != 0, "{id}");
        }
    }
}

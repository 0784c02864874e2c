//! File stamps of mappings, remembered briefly by the file's identity as
//! the maps give it (device and inode): a build host starts the same few
//! binaries hundreds of times a second, and each stamp is a `stat`
//! through `/proc/PID/map_files` (7% of the daemon's CPU in a shell loop
//! of real programs). A stamp is trusted for [`FRESH_FOR`]: a file
//! rewritten in place keeps its old stamp until then (a running
//! executable cannot be written: `ETXTBSY`).
use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use super::maps::{FileId, FileStamp, Vma};

/// How long a stamp is trusted.
const FRESH_FOR: Duration = Duration::from_secs(1);
/// Files remembered at most (stale ones are dropped when it is reached).
const MAX_FILES: usize = profiler_common::bound::MEMO_ENTRIES;

#[derive(Default)]
pub struct Stamps {
    known: HashMap<FileId, (FileStamp, Instant)>,
}

impl Stamps {
    /// The stamp of the file `pid` maps at `vma` ([`FileStamp::of_mapping`]),
    /// as read within [`FRESH_FOR`] for a mapping of the same file.
    pub fn of(&mut self, pid: u32, vma: &Vma) -> Option<FileStamp> {
        let Some(file) = vma.file else {
            return FileStamp::of_mapping(pid, vma);
        };
        let now = Instant::now();
        if let Some((stamp, at)) = self.known.get(&file)
            && now.duration_since(*at) < FRESH_FOR
        {
            return Some(*stamp);
        }
        let stamp = FileStamp::of_mapping(pid, vma)?;
        if self.known.len() >= MAX_FILES {
            self.known
                .retain(|_, (_, at)| now.duration_since(*at) < FRESH_FOR);
        }
        self.known.insert(file, (stamp, now));
        Some(stamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_mapped_again_is_stamped_once_a_second() {
        let pid = std::process::id();
        let vmas = crate::process::maps::read(pid).unwrap();
        let vma = vmas.iter().find(|v| v.is_file()).unwrap();
        let mut stamps = Stamps::default();
        let first = stamps.of(pid, vma).unwrap();
        assert_eq!(Some(first), FileStamp::of_mapping(pid, vma));
        // A file the maps do not identify is stamped anew.
        let unknown = Vma {
            file: None,
            ..vma.clone()
        };
        assert_eq!(stamps.of(pid, &unknown), Some(first));
        // Remembered: a mapping of the same file that is gone answers.
        let gone = Vma {
            start: 1,
            end: 2,
            ..vma.clone()
        };
        assert_eq!(stamps.of(pid, &gone), Some(first));
        assert_eq!(FileStamp::of_mapping(pid, &gone), None);
    }
}

//! Pushes waiting for their backend: one file per request body in a
//! directory of the endpoint's own, named by a sequence number so they are
//! sent in order, written to a temporary file, fsync'd and renamed so a
//! crash never leaves half a push. Bounded in bytes: past the bound the
//! oldest are dropped.
use std::{
    collections::VecDeque,
    fs,
    io::{self, Write as _},
    os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

const SUFFIX: &str = ".push";

/// One waiting request body.
#[derive(Debug)]
pub struct Entry {
    pub seq: u64,
    pub bytes: u64,
    pub created: SystemTime,
}

#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
    entries: VecDeque<Entry>,
    total: u64,
    next_seq: u64,
}

impl Spool {
    /// Opens (creating, mode 0700) the spool in `dir` and takes up what an
    /// earlier run left, oldest first; temporary files of an interrupted
    /// write are removed.
    ///
    /// # Errors
    /// When the directory cannot be made or read.
    pub fn open(dir: &Path, max_bytes: u64) -> io::Result<Self> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let mut entries = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".tmp") {
                let _ = fs::remove_file(entry.path());
                continue;
            }
            let Some(seq) = name
                .strip_suffix(SUFFIX)
                .and_then(|s| u64::from_str_radix(s, 16).ok())
            else {
                continue;
            };
            let meta = entry.metadata()?;
            entries.push(Entry {
                seq,
                bytes: meta.len(),
                created: meta.modified().unwrap_or_else(|_| SystemTime::now()),
            });
        }
        entries.sort_by_key(|e| e.seq);
        let next_seq = entries.last().map_or(0, |e| e.seq + 1);
        let total = entries.iter().map(|e| e.bytes).sum();
        Ok(Self {
            dir: dir.to_owned(),
            max_bytes,
            entries: entries.into(),
            total,
            next_seq,
        })
    }

    fn path(&self, seq: u64) -> PathBuf {
        self.dir.join(format!("{seq:016x}{SUFFIX}"))
    }

    /// Adds `body` at the back, then drops the oldest entries while the
    /// spool is over its bound (the new one too, if it alone is). Returns
    /// how many were dropped.
    ///
    /// # Errors
    /// When the body cannot be written; nothing is added then.
    pub fn push(&mut self, body: &[u8]) -> io::Result<u64> {
        let seq = self.next_seq;
        let path = self.path(seq);
        let tmp = path.with_extension("tmp");
        let written = (|| {
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(body)?;
            file.sync_all()?;
            fs::rename(&tmp, &path)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        self.next_seq += 1;
        let bytes = body.len() as u64;
        self.entries.push_back(Entry {
            seq,
            bytes,
            created: SystemTime::now(),
        });
        self.total += bytes;
        let mut dropped = 0;
        while self.total > self.max_bytes && !self.entries.is_empty() {
            self.pop()?;
            dropped += 1;
        }
        Ok(dropped)
    }

    /// The oldest entry's body.
    ///
    /// # Errors
    /// When it cannot be read.
    pub fn front(&self) -> Option<io::Result<Vec<u8>>> {
        self.entries.front().map(|e| fs::read(self.path(e.seq)))
    }

    /// Removes the oldest entry.
    ///
    /// # Errors
    /// When its file cannot be removed (it is forgotten all the same).
    pub fn pop(&mut self) -> io::Result<()> {
        let Some(entry) = self.entries.pop_front() else {
            return Ok(());
        };
        self.total -= entry.bytes;
        match fs::remove_file(self.path(entry.seq)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.total
    }

    /// How long the oldest entry has waited; zero when empty.
    #[must_use]
    pub fn oldest_age(&self) -> Duration {
        self.entries.front().map_or(Duration::ZERO, |e| {
            e.created.elapsed().unwrap_or(Duration::ZERO)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_back_in_order_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), 1 << 20).unwrap();
        for body in [b"one".as_slice(), b"two", b"three"] {
            assert_eq!(spool.push(body).unwrap(), 0);
        }
        spool.pop().unwrap();
        // An interrupted write leaves only a temporary file behind.
        fs::write(dir.path().join("0000000000000009.tmp"), b"half").unwrap();
        drop(spool);

        let mut spool = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!((spool.len(), spool.bytes()), (2, 8));
        assert_eq!(spool.front().unwrap().unwrap(), b"two");
        spool.push(b"four").unwrap();
        let mut sent = Vec::new();
        while let Some(body) = spool.front() {
            sent.push(String::from_utf8(body.unwrap()).unwrap());
            spool.pop().unwrap();
        }
        assert_eq!(sent, ["two", "three", "four"]);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_full_spool_drops_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), 10).unwrap();
        assert_eq!(spool.push(b"aaaa").unwrap(), 0);
        assert_eq!(spool.push(b"bbbb").unwrap(), 0);
        assert_eq!(spool.push(b"cccc").unwrap(), 1);
        assert_eq!(spool.front().unwrap().unwrap(), b"bbbb");
        // A body larger than the bound goes too, with everything before it.
        assert_eq!(spool.push(&[0; 11]).unwrap(), 3);
        assert!(spool.is_empty());
        assert_eq!(spool.bytes(), 0);
    }
}

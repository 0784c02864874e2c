//! Profile files on disk: gzip, write to a temp file in the same
//! directory, fsync, rename into place, keep the newest N.
use std::{
    fs,
    io::{self, Write as _},
    os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _},
    path::{Path, PathBuf},
    time::SystemTime,
};

use flate2::{Compression, write::GzEncoder};

const PREFIX: &str = "profile-";
const SUFFIX: &str = ".pb.gz";

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("writing {path}")]
    Write { path: PathBuf, source: io::Error },
}

/// Windows kept in memory for another try when they could not be written.
const MAX_PENDING: usize = 16;

pub struct FileSink {
    dir: PathBuf,
    retain: usize,
    /// Windows whose write failed (disk full, directory gone), oldest first.
    pending: Vec<(Vec<u8>, SystemTime)>,
}

impl FileSink {
    #[must_use]
    pub fn new(dir: PathBuf, retain: usize) -> Self {
        Self {
            dir,
            retain,
            pending: Vec::new(),
        }
    }

    /// Writes one profile atomically as `DIR/profile-<UTC time>.pb.gz`
    /// (mode 0640), then deletes the oldest files beyond `retain`. Windows
    /// that failed before are tried again first, oldest first.
    ///
    /// On failure the window is kept for the next call (at most
    /// [`MAX_PENDING`] windows; older ones are dropped with a warning) and
    /// no partial file is left behind.
    ///
    /// # Errors
    /// The first write that failed.
    pub fn write(&mut self, pprof: &[u8], window_start: SystemTime) -> Result<PathBuf, SinkError> {
        self.pending.push((pprof.to_vec(), window_start));
        loop {
            let (bytes, start) = &self.pending[0];
            match self.write_one(bytes, *start) {
                Ok(path) => {
                    self.pending.remove(0);
                    if self.pending.is_empty() {
                        self.rotate();
                        return Ok(path);
                    }
                }
                Err(e) => {
                    if self.pending.len() > MAX_PENDING {
                        self.pending.remove(0);
                        tracing::warn!(
                            "dropping the oldest unwritten window: {MAX_PENDING} are waiting"
                        );
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Number of windows waiting to be written.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    fn write_one(&self, pprof: &[u8], window_start: SystemTime) -> Result<PathBuf, SinkError> {
        let err = |path: &Path, source| SinkError::Write {
            path: path.to_owned(),
            source,
        };
        // The directory may have been removed while running: make it again.
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o750)
            .create(&self.dir)
            .map_err(|e| err(&self.dir, e))?;
        let path = self.unused_path(window_start);
        let tmp = self.dir.join(format!(
            ".{}.tmp",
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        ));
        if let Err(e) = write_synced(&tmp, pprof) {
            let _ = fs::remove_file(&tmp);
            return Err(err(&path, e));
        }
        if let Err(e) = fs::rename(&tmp, &path) {
            let _ = fs::remove_file(&tmp);
            return Err(err(&path, e));
        }
        // Make the rename itself durable.
        fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| err(&path, e))?;
        Ok(path)
    }

    /// The file name for a window; suffixed if two windows share a millisecond.
    fn unused_path(&self, window_start: SystemTime) -> PathBuf {
        let stamp = file_timestamp(window_start);
        let mut path = self.dir.join(format!("{PREFIX}{stamp}{SUFFIX}"));
        let mut n = 1;
        while path.exists() {
            path = self.dir.join(format!("{PREFIX}{stamp}-{n}{SUFFIX}"));
            n += 1;
        }
        path
    }

    fn rotate(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| is_profile_file(p))
            .collect();
        if files.len() <= self.retain {
            return;
        }
        // Names sort by time: the timestamp is fixed-width UTC.
        files.sort();
        for old in &files[..files.len() - self.retain] {
            if let Err(e) = fs::remove_file(old) {
                tracing::warn!("removing old profile {}: {e}", old.display());
            }
        }
    }
}

fn write_synced(path: &Path, pprof: &[u8]) -> io::Result<()> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o640)
        .open(path)?;
    // The fastest level, as `pprof::gzip`.
    let mut gz = GzEncoder::new(file, Compression::fast());
    gz.write_all(pprof)?;
    let file = gz.finish()?;
    file.sync_all()
}

fn is_profile_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(PREFIX) && n.ends_with(SUFFIX))
}

/// `20261122T104512.123Z`: UTC, fixed width, sorts in time order, no colons.
fn file_timestamp(t: SystemTime) -> String {
    let rfc = humantime::format_rfc3339_millis(t).to_string(); // 2026-11-22T10:45:12.123Z
    rfc.chars().filter(|c| *c != '-' && *c != ':').collect()
}

#[cfg(test)]
mod tests {
    use std::{
        io::Read as _,
        os::unix::fs::PermissionsExt as _,
        time::{Duration, UNIX_EPOCH},
    };

    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn timestamp_format() {
        assert_eq!(file_timestamp(at(1_795_350_312)), "20261122T122512.000Z");
    }

    #[test]
    fn writes_gzip_with_mode_and_rotates() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = FileSink::new(dir.path().to_owned(), 2);
        let mut written = Vec::new();
        for i in 0..4 {
            written.push(
                sink.write(format!("profile {i}").as_bytes(), at(1_000 + i))
                    .unwrap(),
            );
        }
        let mut left: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        left.sort();
        assert_eq!(
            left,
            written[2..],
            "only the newest two remain, no temp files"
        );
        let mut text = String::new();
        flate2::read::GzDecoder::new(fs::File::open(&left[1]).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "profile 3");
        assert_eq!(
            fs::metadata(&left[1]).unwrap().permissions().mode() & 0o777,
            0o640
        );
    }

    #[test]
    fn same_millisecond_gets_a_new_name() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = FileSink::new(dir.path().to_owned(), 10);
        let a = sink.write(b"a", at(5)).unwrap();
        let b = sink.write(b"b", at(5)).unwrap();
        assert_ne!(a, b);
        assert!(is_profile_file(&b));
    }

    #[test]
    fn failure_leaves_nothing_and_the_window_is_retried() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the directory should be: every write fails.
        let out = dir.path().join("out");
        fs::write(&out, b"").unwrap();
        let mut sink = FileSink::new(out.clone(), 10);
        assert!(sink.write(b"first", at(5)).is_err());
        assert!(sink.write(b"second", at(6)).is_err());
        assert_eq!(sink.pending(), 2);
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "nothing written"
        );
        // Once writable again, both waiting windows and the new one land.
        fs::remove_file(&out).unwrap();
        sink.write(b"third", at(7)).unwrap();
        assert_eq!(sink.pending(), 0);
        assert_eq!(fs::read_dir(&out).unwrap().count(), 3);
    }

    #[test]
    fn a_removed_directory_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let mut sink = FileSink::new(out.clone(), 10);
        sink.write(b"a", at(5)).unwrap();
        fs::remove_dir_all(&out).unwrap();
        sink.write(b"b", at(6)).unwrap();
        assert_eq!(
            fs::metadata(&out).unwrap().permissions().mode() & 0o777,
            0o750
        );
    }

    #[test]
    fn waiting_windows_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        fs::write(&out, b"").unwrap();
        let mut sink = FileSink::new(out, 10);
        for i in 0..40 {
            assert!(sink.write(b"x", at(i)).is_err());
        }
        assert_eq!(sink.pending(), MAX_PENDING);
    }
}

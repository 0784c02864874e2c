//! Debug files fetched from debuginfod servers, in the background.
//!
//! The symbolizer asks for a build id when a binary has no local debug
//! file; one worker thread downloads it (the `debuginfod` crate's client,
//! with a time-out) into the cache directory, in the layout the debuginfod
//! client uses (`CACHE/BUILDID/debuginfo`), and the symbolizer picks the file
//! up at its next window. Nothing waits for a download. An id that no server
//! has, or whose download failed, is not asked for again for
//! [`RETRY_AFTER`].
use std::{
    collections::HashMap,
    fs,
    io::{self, Write as _},
    path::{Path, PathBuf},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use debuginfod::{BuildId, Client, reqwest::blocking as http};

use crate::config;

/// How long a build id that no server had (or that failed) is not asked for.
pub const RETRY_AFTER: Duration = Duration::from_mins(10);

/// Build ids remembered at least before those past [`RETRY_AFTER`] are
/// dropped (a build host's new binaries, whose debug files no server has,
/// would otherwise each stay for good): then again at twice what is left.
const PRUNE_AT: usize = 4_096;

/// Debuginfod accounting since the last [`Debuginfod::take_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DebuginfodStats {
    /// Debug files downloaded.
    pub fetched: u64,
    /// Build ids that no server has.
    pub missing: u64,
    /// Downloads that failed: server errors, time-outs, over the size cap.
    pub failed: u64,
    /// Bytes downloaded.
    pub bytes: u64,
    /// Milliseconds spent downloading (in the background).
    pub fetch_ms: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum DebuginfodError {
    #[error("failed to create the debuginfod cache directory {0}")]
    CacheDir(PathBuf, #[source] io::Error),
    #[error("failed to start the debuginfod download thread")]
    Thread(#[source] io::Error),
}

/// Where a debug file stands, as a lookup found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DebugFile {
    /// The debug file is in the cache.
    Cached(PathBuf),
    /// Asked for; look again next window.
    Pending,
    /// No server has it, or it failed recently.
    Unavailable,
}

enum State {
    Pending,
    Unavailable { since: Instant },
}

/// The end of one download.
struct Fetched {
    id: String,
    outcome: Outcome,
    elapsed: Duration,
}

enum Outcome {
    Stored { bytes: u64 },
    Missing,
    Failed(FetchError),
}

/// Why one download failed.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error("downloading the debug file of {0}")]
    Download(String, #[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the debug file of {id} is over the {mib} MiB cap")]
    TooLarge { id: String, mib: u64 },
    #[error("writing the download of {0}")]
    Write(String, #[source] io::Error),
    #[error("storing {0}")]
    Store(PathBuf, #[source] io::Error),
}

/// Handle of the download thread, owned by the symbolizer.
pub struct Debuginfod {
    cache_dir: PathBuf,
    requests: mpsc::Sender<String>,
    done: mpsc::Receiver<Fetched>,
    states: HashMap<String, State>,
    /// The size of `states` at which the next prune comes.
    prune_at: usize,
    stats: DebuginfodStats,
}

impl Debuginfod {
    /// Creates the cache directory and starts the download thread.
    ///
    /// # Errors
    /// When the cache directory cannot be created or the thread not started.
    pub fn start(config: &config::DebuginfodServers) -> Result<Self, DebuginfodError> {
        fs::create_dir_all(&config.cache_dir)
            .map_err(|e| DebuginfodError::CacheDir(config.cache_dir.clone(), e))?;
        let (requests, queue) = mpsc::channel();
        let (finished, done) = mpsc::channel();
        let worker = Worker {
            urls: config.urls.clone(),
            cache_dir: config.cache_dir.clone(),
            timeout: config.timeout,
            max_bytes: config.max_bytes,
        };
        thread::Builder::new()
            .name("debuginfod".into())
            .spawn(move || worker.run(&queue, &finished))
            .map_err(DebuginfodError::Thread)?;
        Ok(Self {
            cache_dir: config.cache_dir.clone(),
            requests,
            done,
            states: HashMap::new(),
            prune_at: PRUNE_AT,
            stats: DebuginfodStats::default(),
        })
    }

    /// Looks up the debug file of build id `id` (hex), asking the servers
    /// for it if it is not cached and not known to be unavailable.
    pub fn lookup(&mut self, id: &str) -> DebugFile {
        let path = cached_path(&self.cache_dir, id);
        if path.is_file() {
            return DebugFile::Cached(path);
        }
        match self.states.get(id) {
            Some(State::Pending) => return DebugFile::Pending,
            Some(State::Unavailable { since }) if since.elapsed() < RETRY_AFTER => {
                return DebugFile::Unavailable;
            }
            _ => {}
        }
        if self.requests.send(id.to_owned()).is_err() {
            // The thread is gone; it logged why.
            return DebugFile::Unavailable;
        }
        self.states.insert(id.to_owned(), State::Pending);
        DebugFile::Pending
    }

    /// Build ids whose downloads ended since the last call (fetched or not),
    /// with the accounting updated.
    pub fn finished(&mut self) -> Vec<String> {
        let mut ids = Vec::new();
        while let Ok(fetched) = self.done.try_recv() {
            let ms = u64::try_from(fetched.elapsed.as_millis()).unwrap_or(u64::MAX);
            self.stats.fetch_ms += ms;
            match fetched.outcome {
                Outcome::Stored { bytes } => {
                    tracing::info!(
                        build_id = fetched.id,
                        bytes,
                        ms,
                        "debuginfod: fetched debug file"
                    );
                    self.stats.fetched += 1;
                    self.stats.bytes += bytes;
                    self.states.remove(&fetched.id);
                }
                Outcome::Missing => {
                    tracing::debug!(build_id = fetched.id, "debuginfod: no server has it");
                    self.stats.missing += 1;
                    self.mark_unavailable(&fetched.id);
                }
                Outcome::Failed(why) => {
                    let why = crate::error_chain(&why);
                    tracing::warn!(build_id = fetched.id, "debuginfod: {why}");
                    self.stats.failed += 1;
                    self.mark_unavailable(&fetched.id);
                }
            }
            ids.push(fetched.id);
        }
        ids
    }

    /// Downloads still under way.
    #[must_use]
    pub fn pending(&self) -> u64 {
        self.states
            .values()
            .filter(|s| matches!(s, State::Pending))
            .count() as u64
    }

    /// The accounting since the last call.
    pub fn take_stats(&mut self) -> DebuginfodStats {
        std::mem::take(&mut self.stats)
    }

    fn mark_unavailable(&mut self, id: &str) {
        let now = Instant::now();
        if self.states.len() >= self.prune_at {
            self.prune(now);
        }
        self.states
            .insert(id.to_owned(), State::Unavailable { since: now });
    }

    /// Drops the build ids that may be asked for again at `now` (the same
    /// to [`Debuginfod::lookup`] as ids never asked for).
    fn prune(&mut self, now: Instant) {
        self.states.retain(|_, state| match state {
            State::Pending => true,
            State::Unavailable { since } => now.duration_since(*since) < RETRY_AFTER,
        });
        self.prune_at = (2 * self.states.len()).max(PRUNE_AT);
    }
}

/// Where the debug file of build id `id` is cached.
fn cached_path(cache_dir: &Path, id: &str) -> PathBuf {
    cache_dir.join(id).join("debuginfo")
}

/// The download thread's side.
struct Worker {
    urls: Vec<String>,
    cache_dir: PathBuf,
    timeout: Duration,
    max_bytes: u64,
}

impl Worker {
    fn run(self, queue: &mpsc::Receiver<String>, finished: &mpsc::Sender<Fetched>) {
        // reqwest's blocking client runs its own runtime: it is built and
        // dropped on this thread, never on the daemon's tokio threads.
        let client = http::Client::builder()
            .timeout(self.timeout)
            .connect_timeout(self.timeout)
            .build()
            .map_err(|e| format!("{e}"))
            .and_then(|http| {
                Client::builder()
                    .http_client(http)
                    .build(self.urls.iter().map(String::as_str))
                    .map_err(|e| format!("{e:#}"))?
                    .ok_or_else(|| "no servers".to_owned())
            });
        let client = match client {
            Ok(client) => client,
            Err(why) => {
                tracing::warn!("debuginfod: cannot make a client ({why}); no downloads");
                return;
            }
        };
        while let Ok(id) = queue.recv() {
            let started = Instant::now();
            let outcome = self.fetch(&client, &id);
            let fetched = Fetched {
                id,
                outcome,
                elapsed: started.elapsed(),
            };
            if finished.send(fetched).is_err() {
                return;
            }
        }
    }

    fn fetch(&self, client: &Client, id: &str) -> Outcome {
        let response = match client.fetch_debug_info(&BuildId::formatted(id)) {
            Ok(Some(response)) => response,
            Ok(None) => return Outcome::Missing,
            Err(e) => return Outcome::Failed(FetchError::Download(id.to_owned(), e.into())),
        };
        match self.store(id, response.data) {
            Ok(bytes) => Outcome::Stored { bytes },
            Err(why) => Outcome::Failed(why),
        }
    }

    /// Writes the download to a temporary file and renames it into place,
    /// so a reader never sees half a file; refuses more than `max_bytes`.
    fn store(&self, id: &str, data: impl io::Read) -> Result<u64, FetchError> {
        let path = cached_path(&self.cache_dir, id);
        let dir = path.parent().unwrap_or(&self.cache_dir);
        let partial = dir.join(format!(".debuginfo.{}.partial", std::process::id()));
        let write = || -> io::Result<u64> {
            fs::create_dir_all(dir)?;
            let mut file = fs::File::create(&partial)?;
            let bytes = io::copy(&mut data.take(self.max_bytes + 1), &mut file)?;
            file.flush()?;
            Ok(bytes)
        };
        let result = match write() {
            Ok(bytes) if bytes > self.max_bytes => Err(FetchError::TooLarge {
                id: id.to_owned(),
                mib: self.max_bytes >> 20,
            }),
            Ok(bytes) => fs::rename(&partial, &path)
                .map(|()| bytes)
                .map_err(|e| FetchError::Store(path.clone(), e)),
            Err(e) => Err(FetchError::Write(id.to_owned(), e)),
        };
        if result.is_err() {
            let _ = fs::remove_file(&partial);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downloads_over_the_cap_are_refused_and_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let worker = Worker {
            urls: Vec::new(),
            cache_dir: dir.path().to_owned(),
            timeout: Duration::from_secs(1),
            max_bytes: 10,
        };
        assert!(worker.store("abcd", &[0_u8; 11][..]).is_err());
        let entry = dir.path().join("abcd");
        assert_eq!(
            fs::read_dir(&entry).unwrap().count(),
            0,
            "no partial file left"
        );
        assert_eq!(worker.store("abcd", &[7_u8; 10][..]).unwrap(), 10);
        assert_eq!(fs::read(cached_path(dir.path(), "abcd")).unwrap(), [7; 10]);
    }

    #[test]
    fn an_id_no_server_has_is_not_asked_for_again() {
        let dir = tempfile::tempdir().unwrap();
        let (requests, queue) = mpsc::channel();
        let (finished, done) = mpsc::channel();
        let mut debuginfod = Debuginfod {
            cache_dir: dir.path().to_owned(),
            requests,
            done,
            states: HashMap::new(),
            prune_at: PRUNE_AT,
            stats: DebuginfodStats::default(),
        };
        assert_eq!(debuginfod.lookup("ab12"), DebugFile::Pending);
        assert_eq!(debuginfod.lookup("ab12"), DebugFile::Pending);
        assert_eq!(queue.try_iter().count(), 1, "asked for once");
        assert_eq!(debuginfod.pending(), 1);

        finished
            .send(Fetched {
                id: "ab12".into(),
                outcome: Outcome::Missing,
                elapsed: Duration::from_millis(5),
            })
            .unwrap();
        assert_eq!(debuginfod.finished(), ["ab12"]);
        assert_eq!(debuginfod.lookup("ab12"), DebugFile::Unavailable);
        assert_eq!(queue.try_iter().count(), 0, "not asked for again");
        let stats = debuginfod.take_stats();
        assert_eq!((stats.missing, stats.fetch_ms, stats.fetched), (1, 5, 0));
        assert_eq!(debuginfod.pending(), 0);

        // A file in the cache (from an earlier run) is used as it is.
        let path = cached_path(dir.path(), "ab12");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, b"elf").unwrap();
        assert_eq!(debuginfod.lookup("ab12"), DebugFile::Cached(path));
    }

    #[test]
    fn ids_past_their_retry_time_are_dropped_once_thousands_are_known() {
        let (requests, _queue) = mpsc::channel();
        let (_finished, done) = mpsc::channel();
        let mut debuginfod = Debuginfod {
            cache_dir: PathBuf::from("/nonexistent"),
            requests,
            done,
            states: HashMap::new(),
            prune_at: PRUNE_AT,
            stats: DebuginfodStats::default(),
        };
        for i in 0..PRUNE_AT {
            debuginfod.mark_unavailable(&format!("{i:x}"));
        }
        debuginfod.states.insert("pending".into(), State::Pending);
        // Within their retry time: all kept, and the next prune later.
        debuginfod.mark_unavailable("young");
        assert_eq!(debuginfod.states.len(), PRUNE_AT + 2);
        assert_eq!(debuginfod.prune_at, 2 * (PRUNE_AT + 1));
        // Past it, all but the download under way go.
        debuginfod.prune(Instant::now() + RETRY_AFTER);
        assert_eq!(debuginfod.states.len(), 1);
        assert_eq!(debuginfod.lookup("pending"), DebugFile::Pending);
        assert_eq!(debuginfod.prune_at, PRUNE_AT);
    }
}

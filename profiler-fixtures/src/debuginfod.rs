//! A real debuginfod server (Debian's `debuginfod`) on loopback, for the
//! symbol tests and the symbolization bench: it serves the debug files
//! under a directory, and is killed when dropped.
use std::{
    io::{self, Read as _, Write as _},
    net::{TcpListener, TcpStream},
    path::Path,
    process::{Child, Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

/// How long the server may take to index a directory of a few files.
const INDEX_TIMEOUT: Duration = Duration::from_mins(1);

/// A running `debuginfod -F DIR`.
pub struct Server {
    child: Child,
    url: String,
}

impl Server {
    /// Starts it on a free port with its database at `db`, and waits until
    /// it serves the debug file of `build_id` (hex): asked for before its
    /// first scan ends, a file is "missing".
    ///
    /// # Errors
    /// When `debuginfod` cannot start, exits, or has not indexed the file
    /// within a minute.
    pub fn start(dir: &Path, db: &Path, build_id: &str) -> io::Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new("debuginfod")
            .args(["-p", &port.to_string(), "-F"])
            .arg(dir)
            .arg("-d")
            .arg(db)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("starting debuginfod (Debian's debuginfod package): {e}"),
                )
            })?;
        let mut server = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let path = format!("/buildid/{build_id}/debuginfo");
        let started = Instant::now();
        while status_of(port, &path) != Some(200) {
            if server.child.try_wait()?.is_some() {
                return Err(io::Error::other("debuginfod exited"));
            }
            if started.elapsed() > INDEX_TIMEOUT {
                return Err(io::Error::other(format!(
                    "debuginfod on port {port} did not index {} within {INDEX_TIMEOUT:?}",
                    dir.display()
                )));
            }
            sleep(Duration::from_millis(200));
        }
        Ok(server)
    }

    /// `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The HTTP status of `GET path` on the local `port`, if it answers.
fn status_of(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut head = [0; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

//! The other end of [`crate::run_protocol`]: starts a fixture, reads its
//! `ready` ids, says "go", reads its result line, and on drop closes its
//! stdin and reaps it. The real-kernel tests and `cargo xtask bench`/`soak`
//! drive every fixture through this one client.
use std::{
    collections::HashMap,
    io::{self, BufRead as _, BufReader, Write as _},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    str::FromStr,
};

/// A running fixture, between its ready line and its end.
pub struct Fixture {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// The ids from the ready line: `pid`, and thread ids by name.
    pub ids: HashMap<String, u32>,
}

impl Fixture {
    /// Starts `command` (its stdin and stdout piped) and reads its ready
    /// line.
    ///
    /// # Errors
    /// When it cannot start, or exits or says no `pid=` before it is ready.
    pub fn spawn(mut command: Command) -> io::Result<Self> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or(io::ErrorKind::BrokenPipe)?;
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let ids: HashMap<String, u32> = fields(&line);
        if !ids.contains_key("pid") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("fixture ready line without pid=: {line:?}"),
            ));
        }
        Ok(Self {
            child,
            stdin,
            stdout,
            ids,
        })
    }

    /// The fixture's process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.ids["pid"]
    }

    /// Starts the measured phase.
    ///
    /// # Errors
    /// When the fixture's stdin is closed.
    pub fn go(&mut self) -> io::Result<()> {
        let stdin = self.stdin.as_mut().ok_or(io::ErrorKind::BrokenPipe)?;
        stdin.write_all(b"go\n")?;
        stdin.flush()
    }

    /// Waits for the measured phase's end; returns its result line.
    ///
    /// # Errors
    /// When the fixture's stdout fails.
    pub fn result_line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        Ok(line)
    }

    /// Waits for the measured phase's end; returns its measured truth, the
    /// result line's `key=value` numbers.
    ///
    /// # Errors
    /// When the fixture's stdout fails.
    pub fn results(&mut self) -> io::Result<HashMap<String, u64>> {
        self.result_line().map(|line| fields(&line))
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `key=value` pairs of whitespace-separated text whose values parse
/// as `T` (other words are ignored).
#[must_use]
pub fn fields<T: FromStr>(text: &str) -> HashMap<String, T> {
    text.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter_map(|(k, v)| Some((k.to_owned(), v.parse().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drives_a_fixture_through_the_protocol() {
        let mut command = Command::new("sh");
        command.args([
            "-c",
            "echo ready pid=$$ worker=7; read go; echo n=3 took=12 note=x; cat >/dev/null",
        ]);
        let mut fixture = Fixture::spawn(command).unwrap();
        assert!(fixture.pid() > 0);
        assert_eq!(fixture.ids["worker"], 7);
        fixture.go().unwrap();
        let results = fixture.results().unwrap();
        assert_eq!((results["n"], results["took"]), (3, 12));
        assert!(!results.contains_key("note"), "not a number");
    }

    #[test]
    fn a_fixture_that_never_gets_ready_is_an_error() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo oops"]);
        let err = Fixture::spawn(command).err().unwrap();
        assert!(err.to_string().contains("without pid="), "{err}");
    }
}

//! `GET` with curl, as an operator would scrape the daemon: for the
//! real-kernel tests and the bench.
use std::{io, process::Command};

/// `GET url` (at most two minutes): the HTTP status and the body.
///
/// # Errors
/// When curl cannot run, or fails (no connection, time-out).
pub fn get(url: &str) -> io::Result<(u16, Vec<u8>)> {
    // The status goes after the body, on a line of its own.
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "120", "-w", "\n%{http_code}", url])
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("running curl: {e}")))?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "curl {url}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let mut body = out.stdout;
    let newline = body
        .iter()
        .rposition(|&b| b == b'\n')
        .ok_or_else(|| io::Error::other("curl printed no status"))?;
    let status = std::str::from_utf8(&body[newline + 1..])
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| io::Error::other("curl printed no status"))?;
    body.truncate(newline);
    Ok((status, body))
}

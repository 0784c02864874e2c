//! Credentials for the backends, read from a file that only root can read
//! (`--push-auth-file`): never from the command line, where every user
//! sees them in `ps`, and never logged.
use std::{
    fs, io,
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
};

use base64::Engine as _;
use reqwest::header::HeaderValue;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("reading {0}")]
    Read(PathBuf, #[source] io::Error),
    #[error(
        "{path} can be read by others (mode {mode:o}): make it 0600 or 0400 (chmod 600 {path})"
    )]
    Mode { path: PathBuf, mode: u32 },
    #[error("{path} is owned by uid {uid}: it must be owned by root or the daemon's user")]
    Owner { path: PathBuf, uid: u32 },
    #[error("{0} must hold one line, `Bearer TOKEN` or `Basic USER:PASSWORD`")]
    Format(PathBuf),
}

/// The `Authorization` header that the file at `path` gives, marked
/// sensitive so it never shows in debug output.
///
/// # Errors
/// When the file cannot be read, others may read it, or it holds neither
/// form.
pub fn read(path: &Path) -> Result<HeaderValue, AuthError> {
    let meta = fs::metadata(path).map_err(|e| AuthError::Read(path.to_owned(), e))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(AuthError::Mode {
            path: path.to_owned(),
            mode,
        });
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if meta.uid() != 0 && meta.uid() != euid {
        return Err(AuthError::Owner {
            path: path.to_owned(),
            uid: meta.uid(),
        });
    }
    let text = fs::read_to_string(path).map_err(|e| AuthError::Read(path.to_owned(), e))?;
    header(text.trim()).ok_or_else(|| AuthError::Format(path.to_owned()))
}

/// `Bearer TOKEN` as it is; `Basic USER:PASSWORD` base64-encoded.
fn header(line: &str) -> Option<HeaderValue> {
    if line.lines().count() != 1 {
        return None;
    }
    let (scheme, secret) = line.split_once(' ')?;
    let secret = secret.trim();
    let value = match scheme {
        "Bearer" if !secret.is_empty() && !secret.contains(' ') => format!("Bearer {secret}"),
        "Basic" if secret.contains(':') => format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(secret)
        ),
        _ => return None,
    };
    let mut value = HeaderValue::from_str(&value).ok()?;
    value.set_sensitive(true);
    Some(value)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn file(text: &str, mode: u32) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        fs::write(file.path(), text).unwrap();
        fs::set_permissions(file.path(), fs::Permissions::from_mode(mode)).unwrap();
        file
    }

    #[test]
    fn bearer_and_basic_become_headers() {
        let bearer = read(file("Bearer abc.def\n", 0o600).path()).unwrap();
        assert_eq!(bearer.to_str().unwrap(), "Bearer abc.def");
        assert!(bearer.is_sensitive());
        let basic = read(file("Basic 123:glc_secret", 0o400).path()).unwrap();
        assert_eq!(basic.to_str().unwrap(), "Basic MTIzOmdsY19zZWNyZXQ=");
    }

    #[test]
    fn a_file_others_can_read_or_a_bad_line_is_refused() {
        let open = file("Bearer abc", 0o644);
        let error = read(open.path()).unwrap_err();
        assert!(error.to_string().contains("mode 644"), "{error}");
        for bad in [
            "abc",
            "Bearer ",
            "Basic nocolon",
            "Bearer a\nBearer b",
            "Digest x",
        ] {
            let error = read(file(bad, 0o600).path()).unwrap_err();
            assert!(matches!(error, AuthError::Format(_)), "{bad:?}: {error}");
        }
    }
}

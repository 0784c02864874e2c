//! The flags for where names come from (debug directories, debuginfod,
//! the plain-copy cache) → [`Symbols`]. A child of `cli`, the only module
//! that sees clap.
use std::{path::PathBuf, time::Duration};

use clap::Args;

use super::values::{parse_duration, parse_size};
use crate::config::{DEFAULT_DEBUG_DIR, DebugCache, DebuginfodServers, Symbols};

/// Where function names come from besides the binaries themselves.
#[derive(Debug, Args)]
pub(super) struct SymbolArgs {
    /// Look for separate debug files under this directory too, before
    /// /usr/lib/debug: by build id (DIR/.build-id/xx/rest.debug) and by
    /// debug link (repeatable).
    #[arg(long = "debug-dir", value_name = "DIR")]
    debug_dirs: Vec<PathBuf>,

    /// Download missing debug files from this debuginfod server, in the
    /// background (repeatable; default: the space-separated list in
    /// DEBUGINFOD_URLS).
    #[arg(
        long = "debuginfod-url",
        value_name = "URL",
        env = "DEBUGINFOD_URLS",
        value_delimiter = ' '
    )]
    debuginfod_urls: Vec<String>,

    /// Do not use debuginfod, even when DEBUGINFOD_URLS is set.
    #[arg(long, conflicts_with = "debuginfod_urls")]
    no_debuginfod: bool,

    /// Where downloaded debug files are kept.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "/var/cache/profiler/debuginfod"
    )]
    debuginfod_cache: PathBuf,

    /// Give up on one debuginfod request after this long.
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = parse_duration)]
    debuginfod_timeout: Duration,

    /// Refuse debug files larger than this, e.g. 512M, 2G.
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = parse_size)]
    debuginfod_max_size: u64,

    /// Where plain copies of debug files whose DWARF is compressed (as
    /// distributions ship them) are kept, so that their sections are read
    /// from disk instead of inflated into memory each time they are parsed.
    #[arg(long, value_name = "DIR", default_value = "/var/cache/profiler/debug")]
    debug_cache: PathBuf,

    /// Most disk the plain copies take, e.g. 256M, 2G; past it the least
    /// recently used are removed. 0 makes no copies.
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = parse_size)]
    debug_cache_max_size: u64,
}

impl SymbolArgs {
    /// The flags as [`Symbols`].
    pub(super) fn config(&self) -> Result<Symbols, String> {
        let mut debug_dirs = self.debug_dirs.clone();
        debug_dirs.push(PathBuf::from(DEFAULT_DEBUG_DIR));
        let urls: Vec<String> = self
            .debuginfod_urls
            .iter()
            .map(|u| u.trim().to_owned())
            .filter(|u| !u.is_empty())
            .collect();
        if let Some(bad) = urls
            .iter()
            .find(|u| url::Url::parse(u).map_or(true, |u| !matches!(u.scheme(), "http" | "https")))
        {
            return Err(format!(
                "--debuginfod-url (or DEBUGINFOD_URLS) {bad:?} is not an http or https URL"
            ));
        }
        if self.debuginfod_timeout.is_zero() {
            return Err("--debuginfod-timeout must be longer than 0".into());
        }
        if self.debuginfod_max_size == 0 {
            return Err("--debuginfod-max-size must be larger than 0".into());
        }
        let debuginfod = (!self.no_debuginfod && !urls.is_empty()).then(|| DebuginfodServers {
            urls,
            cache_dir: self.debuginfod_cache.clone(),
            timeout: self.debuginfod_timeout,
            max_bytes: self.debuginfod_max_size,
        });
        let debug_cache = (self.debug_cache_max_size > 0).then(|| DebugCache {
            dir: self.debug_cache.clone(),
            max_bytes: self.debug_cache_max_size,
        });
        Ok(Symbols {
            debug_dirs,
            debuginfod,
            debug_cache,
        })
    }
}

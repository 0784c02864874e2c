//! The symbol flags (`cli/symbols.rs`), parsed into a whole `Config`.
use std::path::PathBuf;

use super::{parse_err, parse_ok};
use crate::config::DebugCache;

#[test]
fn debug_directories_and_debuginfod_servers() {
    let config = parse_ok(&["--pid", "1", "--debug-dir", "/opt/debug"]);
    assert_eq!(
        config.symbols.debug_dirs,
        [PathBuf::from("/opt/debug"), PathBuf::from("/usr/lib/debug")],
        "given directories first, then the distribution's"
    );
    let config = parse_ok(&[
        "--pid",
        "1",
        "--debuginfod-url",
        "http://127.0.0.1:8002",
        "--debuginfod-url",
        "https://debuginfod.debian.net",
        "--debuginfod-max-size",
        "64M",
    ]);
    let debuginfod = config.symbols.debuginfod.expect("on with a server");
    assert_eq!(
        debuginfod.urls,
        ["http://127.0.0.1:8002", "https://debuginfod.debian.net"]
    );
    assert_eq!(debuginfod.max_bytes, 64 << 20);
    assert_eq!(
        debuginfod.cache_dir,
        PathBuf::from("/var/cache/profiler/debuginfod")
    );
    parse_err(&[
        "--pid",
        "1",
        "--no-debuginfod",
        "--debuginfod-url",
        "http://a",
    ]);
}

#[test]
fn compressed_debug_files_are_copied_to_the_cache_unless_its_size_is_0() {
    assert_eq!(
        parse_ok(&["--all"]).symbols.debug_cache,
        Some(DebugCache {
            dir: PathBuf::from("/var/cache/profiler/debug"),
            max_bytes: 1 << 30,
        })
    );
    let config = parse_ok(&[
        "--all",
        "--debug-cache",
        "/srv/cache",
        "--debug-cache-max-size",
        "256M",
    ]);
    assert_eq!(
        config.symbols.debug_cache,
        Some(DebugCache {
            dir: PathBuf::from("/srv/cache"),
            max_bytes: 256 << 20,
        })
    );
    let off = parse_ok(&["--all", "--debug-cache-max-size", "0"]);
    assert_eq!(off.symbols.debug_cache, None);
    let err = parse_err(&["--all", "--debug-cache-max-size", "lots"]).to_string();
    assert!(err.contains("not a size"), "{err}");
}

//! Bad input: a clear message, a non-zero exit and nothing written.
mod support;

use std::process::{Command, Output};

use support::{require_root, run};

fn assert_refused(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted; stderr: {stderr}");
    assert!(stderr.contains(needle), "expected {needle:?} in: {stderr}");
}

/// A fresh path under a temp dir that must still not exist afterwards.
struct OutDir(tempfile::TempDir);

impl OutDir {
    fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }
    fn path(&self) -> String {
        self.0.path().join("out").to_str().unwrap().to_owned()
    }
    fn assert_untouched(&self) {
        assert!(
            !self.0.path().join("out").exists(),
            "output dir was created"
        );
    }
}

fn free_pid() -> u32 {
    (400_000..4_000_000)
        .find(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        .expect("a free pid")
}

#[test]
fn usage_errors() {
    let out = OutDir::new();
    let dir = out.path();
    for (args, needle) in [
        (vec!["--output-dir", &dir], "--pid"),
        (
            vec!["--pid", "1", "--frequency", "0", "--output-dir", &dir],
            "at least 1 Hz",
        ),
        (
            vec![
                "--pid",
                "1",
                "--frequency",
                "100000000",
                "--output-dir",
                &dir,
            ],
            "perf_event_max_sample_rate",
        ),
        (
            vec!["--pid", "1", "--interval", "0s", "--output-dir", &dir],
            "--interval",
        ),
        (
            vec!["--pid", "1", "--interval", "soon", "--output-dir", &dir],
            "expected e.g.",
        ),
        (vec!["--pid", "1", "--no-such-flag"], "--no-such-flag"),
        (
            vec!["--pid", "1", "--debuginfod-url", "ftp://debuginfod.example"],
            "not an http or https URL",
        ),
        (
            vec!["--pid", "1", "--debuginfod-timeout", "0s"],
            "--debuginfod-timeout",
        ),
    ] {
        let result = run(&args);
        assert_refused(&result, needle);
        assert_eq!(
            result.status.code(),
            Some(2),
            "usage errors exit 2: {args:?}"
        );
    }
    out.assert_untouched();
}

#[test]
fn bad_debuginfod_urls_variable() {
    let out = OutDir::new();
    let result = support::profiler()
        .args(["--pid", "1", "--output-dir", &out.path()])
        .env("DEBUGINFOD_URLS", "https://debuginfod.example not-a-url")
        .output()
        .unwrap();
    assert_refused(&result, "DEBUGINFOD_URLS");
    assert_eq!(result.status.code(), Some(2));
    out.assert_untouched();
}

#[test]
fn unwritable_debuginfod_cache() {
    require_root();
    let out = OutDir::new();
    let pid = std::process::id().to_string();
    assert_refused(
        &run(&[
            "--pid",
            &pid,
            "--output-dir",
            &out.path(),
            "--debuginfod-url",
            "http://127.0.0.1:9",
            "--debuginfod-cache",
            "/proc/profiler-test/cache",
        ]),
        "debuginfod cache directory /proc/profiler-test/cache",
    );
    out.assert_untouched();
}

#[test]
fn missing_process() {
    require_root();
    let out = OutDir::new();
    let pid = free_pid().to_string();
    assert_refused(
        &run(&["--pid", &pid, "--output-dir", &out.path()]),
        "no such process",
    );
    out.assert_untouched();
}

#[test]
fn unwritable_output_dir() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let under_file = file.join("profiles");
    let pid = std::process::id().to_string();
    assert_refused(
        &run(&["--pid", &pid, "--output-dir", under_file.to_str().unwrap()]),
        "creating the output directory",
    );
    assert_refused(
        &run(&["--pid", &pid, "--output-dir", file.to_str().unwrap()]),
        "is not a directory",
    );
    // Root can write anywhere on a normal filesystem, but not in procfs.
    assert_refused(
        &run(&["--pid", &pid, "--output-dir", "/proc/profiler-test"]),
        "creating the output directory",
    );
    assert_refused(
        &run(&["--pid", &pid, "--output-dir", "/proc/self"]),
        "writing a file in the output directory",
    );
}

#[test]
fn missing_privileges() {
    require_root();
    let out = OutDir::new();
    let pid = std::process::id().to_string();
    let profiler = env!("CARGO_BIN_EXE_profiler");
    // An unprivileged user.
    let result = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .args([profiler, "--pid", &pid, "--output-dir", &out.path()])
        .output()
        .unwrap();
    assert_refused(&result, "missing capability CAP_BPF");
    // Root without CAP_PERFMON (and without CAP_SYS_ADMIN, which implies it).
    let result = Command::new("setpriv")
        .args([
            "--inh-caps=-perfmon,-sys_admin",
            "--bounding-set=-perfmon,-sys_admin",
        ])
        .args([profiler, "--pid", &pid, "--output-dir", &out.path()])
        .output()
        .unwrap();
    assert_refused(&result, "missing capability CAP_PERFMON");
    out.assert_untouched();
}

#[test]
fn missing_btf() {
    require_root();
    let out = OutDir::new();
    let pid = std::process::id().to_string();
    // Hide the kernel's BTF in a private mount namespace.
    let script = format!(
        "mount -t tmpfs none /sys/kernel/btf && exec {} --pid {pid} --output-dir {}",
        env!("CARGO_BIN_EXE_profiler"),
        out.path()
    );
    let result = Command::new("unshare")
        .args(["--mount", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_refused(&result, "no kernel BTF");
    out.assert_untouched();
}

#[test]
fn push_credentials_and_certificates_are_checked_before_anything_is_written() {
    require_root();
    let out = OutDir::new();
    let dir = out.path();
    let work = tempfile::tempdir().unwrap();
    let spool = work.path().join("spool");
    let spool_dir = spool.to_str().unwrap();
    let open_auth = work.path().join("auth-open");
    std::fs::write(&open_auth, "Bearer secret-token\n").unwrap();
    std::fs::set_permissions(
        &open_auth,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let not_pem = work.path().join("ca.pem");
    std::fs::write(&not_pem, "not a certificate").unwrap();
    let missing = work.path().join("missing");
    for (extra, needle) in [
        (
            vec!["--push-auth-file", open_auth.to_str().unwrap()],
            "can be read by others (mode 644)",
        ),
        (
            vec!["--push-auth-file", missing.to_str().unwrap()],
            "reading --push-auth-file",
        ),
        (vec!["--push-ca", not_pem.to_str().unwrap()], "--push-ca"),
    ] {
        let mut args = vec![
            "--pid",
            "1",
            "--output-dir",
            &dir,
            "--push",
            "https://pyroscope.example",
            "--push-spool-dir",
            spool_dir,
        ];
        args.extend(extra);
        let result = run(&args);
        assert_refused(&result, needle);
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(
            !stderr.contains("secret-token"),
            "the secret was printed: {stderr}"
        );
        out.assert_untouched();
        assert!(!spool.exists(), "the spool was created for {needle}");
    }
}

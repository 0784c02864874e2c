//! The goroutine view of targets that become Go programs by exec, by
//! every route a target arrives: `--pid` (the view starts at the exec,
//! and the exit ends the run), `--all` (the daemon hands the processes it
//! saw exec to the goroutine reader), `--comm NAME --wait` (the kernel
//! adopts the process at its exec, and the daemon hands it to the reader
//! at once, not at the chunk's end) and `--pid-file`.
mod support;

use std::{
    io::{BufRead as _, BufReader, Write as _},
    process::{Command, Stdio},
};

use support::{Profiler, go, profiles, require_root};

/// The fixture's 100 receivers wait through its 2 s measured phase, which
/// starts after its `ready` line: 200 s of goroutine time at least. The
/// view must hold seven eighths of it, so it must start within a quarter
/// of a second of the exec (it starts about 0.1 s after: the daemon wakes
/// the goroutine reader for each process it saw exec, rather than leaving
/// it to the reader's next look at its targets, up to 1 s later, which
/// read 128-180 s here; and a `--comm` match the kernel adopted at its
/// exec is followed when its first request rings, not at the next check
/// of the targets, up to 0.5 s later, which read 150-193 s).
const RECEIVING_AT_LEAST: i64 = 175_000_000_000;

/// A target that becomes a Go program by exec and then exits: the view
/// starts at the exec, the exit ends the run, and the daemon exits 0
/// with the goroutines it read.
#[test]
fn a_target_that_execs_into_go_and_exits_is_read_then_let_go() {
    require_root();
    let receiving = exec_into_go(|pid| vec!["--pid".into(), pid.to_string()], "1.5");
    assert!(
        receiving >= RECEIVING_AT_LEAST,
        "{receiving} ns under main.receiver"
    );
}

/// Under `--all`, a process that execs into Go is read from soon after its
/// exec (the daemon hands the processes it saw exec to the goroutine
/// reader), not only at the reader's next listing of `/proc`, 10 s apart.
#[test]
fn under_all_a_process_that_execs_into_go_is_read_soon() {
    require_root();
    // The exec comes well after the reader's first listing of `/proc`.
    let flags = |_| vec!["--all".into(), "--duration".into(), "8s".into()];
    let receiving = exec_into_go(flags, "4");
    assert!(
        receiving >= RECEIVING_AT_LEAST,
        "{receiving} ns under main.receiver"
    );
}

/// Under `--comm NAME --wait` (as the systemd unit is meant to be used), a
/// process that execs into the named Go program is read from its exec:
/// the daemon adopts it within half a second and tells the goroutine
/// reader then, not at the end of the chunk (here a minute later).
#[test]
fn a_process_found_by_name_is_read_from_its_exec() {
    require_root();
    let flags = |_| {
        ["--comm", SERVER, "--wait", "--duration", "8s"]
            .map(String::from)
            .to_vec()
    };
    let receiving = exec_into_go(flags, "3");
    assert!(
        receiving >= RECEIVING_AT_LEAST,
        "{receiving} ns under main.receiver"
    );
}

/// Under `--pid-file`, a process named by a service's PID file that execs
/// into Go is read as a `--pid` target is.
#[test]
fn a_process_named_by_a_pid_file_is_read_from_its_exec() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("service.pid");
    let flags = |pid: u32| {
        std::fs::write(&pid_file, format!("{pid}\n")).unwrap();
        vec!["--pid-file".into(), pid_file.to_str().unwrap().into()]
    };
    let receiving = exec_into_go(flags, "1.5");
    assert!(
        receiving >= RECEIVING_AT_LEAST,
        "{receiving} ns under main.receiver"
    );
}

/// The Go program's name, and so its comm: no other process has it.
const SERVER: &str = "goview_server";

/// Runs the profiler with the flags `flags` gives for the shell's pid (it
/// must end by itself), over a shell that execs into a Go server after
/// `delay` seconds, which runs for 2 s; checks the daemon exited 0 with
/// the view on. Returns the goroutine time under `main.receiver`.
fn exec_into_go(flags: impl FnOnce(u32) -> Vec<String>, delay: &str) -> i64 {
    let toolchain = go::toolchains().pop().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bin = go::build(&toolchain, "goroutines", dir.path(), SERVER, true);
    let reference = dir.path().join("reference.txt");
    // A shell first: its pid is the target before the Go program has it.
    let mut shell = Command::new("sh")
        .arg("-c")
        .arg(format!(r#"sleep {delay}; exec "$0" 2 "$1""#))
        .arg(&bin)
        .arg(&reference)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = shell.id();
    let out = dir.path().join("out");
    let mut args = flags(pid);
    args.extend([
        "--output-dir".into(),
        out.to_str().unwrap().into(),
        "--interval".into(),
        "60s".into(),
    ]);
    let profiler = Profiler::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut stdout = BufReader::new(shell.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains(&format!("pid={pid}")), "{line:?}");
    let mut stdin = shell.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("samples="), "{line:?}");
    // EOF on stdin: the program exits (with --pid, the last target).
    drop(stdin);
    shell.wait().unwrap();
    let (status, log) = profiler.wait();
    assert!(status.success(), "{status}:\n{log}");
    assert!(log.contains("goroutine view on (go1."), "{log}");
    let written = profiles(&out);
    let receiving = written
        .iter()
        .flat_map(|(_, p)| p.samples_of(pid).map(move |s| (p, s)))
        .filter(|(p, s)| p.functions(s).contains(&"main.receiver"))
        .map(|(p, s)| p.value(s, "goroutine"))
        .sum();
    eprintln!("{receiving} ns under main.receiver");
    receiving
}

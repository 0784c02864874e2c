//! OpenTelemetry's thread context (OTEP 4947) read from outside
//! (`profiler-fixtures/c/trace_ctx.c`: a plain `-O2` C program that
//! attaches a record per span to `otel_thread_ctx_v1`, exported as the
//! specification asks): every on-CPU sample in a span's handler carries
//! that span's `trace_id` and `span_id`, and the record's attributes
//! under the names the process context gives them (`http_route`,
//! `http_method`), none outside a span does, each
//! span's share of the samples is within 5 points of the CPU time the
//! program measured, and the span's sleep is its off-CPU time, within 5%
//! of the wall time the program measured. A second thread in its own span
//! all along: its samples carry its span, and no sample of either thread
//! carries the other's; a third thread's record, never marked valid, is
//! never read and is counted. The resource the process published (OTEP
//! 4719's process context) is on every sample of the process.
//!
//! The same holds where the SDK's native part (`otel_thread_ctx.c`) is a
//! shared library, linked or loaded by `dlopen` (as a JVM loads a JNI
//! library), in each TLS dialect a writer may build it with; and for a
//! program in a container, the library loaded from the container's root.
#[path = "thread_ctx/checks.rs"]
mod checks;
mod support;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use support::{Fixture, Profiler, build, container::Container, profiles, require_root};

/// The fixture with the SDK built in, linked as the specification asks.
fn fixture(dir: &Path) -> PathBuf {
    build::cc(
        &dir.join("trace_ctx"),
        &["trace_ctx.c", "otel_thread_ctx.c"],
        &["-Wl,--export-dynamic-symbol=otel_thread_ctx_v1"],
    )
}

/// How the program reaches its SDK's library (linked, or by `dlopen`),
/// the TLS dialect the library is built with, and the relocation its
/// code then reaches the variable through.
const LIBRARY_BUILDS: [(&str, &str, u32); 4] = [
    ("linked", "gnu", object::elf::R_X86_64_DTPMOD64),
    ("linked", "gnu2", object::elf::R_X86_64_TLSDESC),
    ("dlopen", "gnu", object::elf::R_X86_64_DTPMOD64),
    ("dlopen", "gnu2", object::elf::R_X86_64_TLSDESC),
];

/// The fixture's command for a library build (`LIBRARY_BUILDS`), run
/// for four seconds.
fn library_fixture(dir: &Path, how: &str, dialect: &str, relocation: u32) -> Command {
    let dir = dir.join(format!("{how}-{dialect}"));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = build::cc(
        &dir.join("libotel_thread_ctx.so"),
        &["otel_thread_ctx.c"],
        &["-shared", "-fPIC", &format!("-mtls-dialect={dialect}")],
    );
    assert!(
        has_relocation(&lib, relocation),
        "{}: no relocation {relocation} of otel_thread_ctx_v1",
        lib.display()
    );
    let bin = dir.join("trace_ctx");
    let mut command = if how == "linked" {
        let (search, rpath) = (
            format!("-L{}", dir.display()),
            format!("-Wl,-rpath,{}", dir.display()),
        );
        build::cc(
            &bin,
            &["trace_ctx.c"],
            &[&search, "-lotel_thread_ctx", &rpath],
        );
        Command::new(&bin)
    } else {
        build::cc(&bin, &["trace_ctx.c"], &["-DCTX_DLOPEN"]);
        let mut command = Command::new(&bin);
        command.env("TRACE_CTX_LIBRARY", &lib);
        command
    };
    command.arg("4");
    command
}

/// Whether library `lib` has a dynamic relocation of type `r_type`
/// against the variable.
fn has_relocation(lib: &Path, r_type: u32) -> bool {
    use object::{Object as _, ObjectSymbol as _, RelocationFlags, RelocationTarget};
    let data = std::fs::read(lib).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let Some(symbol) = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok("otel_thread_ctx_v1"))
    else {
        return false;
    };
    file.dynamic_relocations()
        .into_iter()
        .flatten()
        .any(|(_, r)| {
            r.target() == RelocationTarget::Symbol(symbol.index())
                && r.flags() == RelocationFlags::Elf { r_type }
        })
}

/// The program started after the daemon, under `--all`, found by its
/// name (`--comm --wait`) and by a PID file written once it runs
/// (`--pid-file --wait`): the same contexts, read from its first samples.
#[test]
fn a_program_found_as_the_daemon_runs_has_its_contexts_read() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = fixture(dir.path());
    let pid_file = dir.path().join("trace_ctx.pid");
    let mut failures = Vec::new();
    for route in ["--all", "--comm", "--pid-file"] {
        let out = dir.path().join(format!("out{route}"));
        let mut args: Vec<&str> = match route {
            "--comm" => vec!["--comm", "trace_ctx", "--wait"],
            "--pid-file" => vec!["--pid-file", pid_file.to_str().unwrap(), "--wait"],
            _ => vec!["--all"],
        };
        args.extend([
            "--output-dir",
            out.to_str().unwrap(),
            "--interval",
            "60s",
            "--frequency",
            "999",
        ]);
        let running = Profiler::start(&args);
        let mut fixture = Fixture::spawn_path(&bin, 3.0);
        std::fs::write(&pid_file, format!("{}\n", fixture.pid())).unwrap();
        std::thread::sleep(std::time::Duration::from_secs(1));
        fixture.go();
        fixture.results();
        let log = running.stop();
        let profiles = profiles(&out);
        let (pid, worker) = (fixture.pid(), fixture.tid("worker"));
        let mut found = checks::other_thread(&profiles, pid, fixture.tid("other"), worker);
        found.extend(checks::torn_thread(&profiles, pid, fixture.tid("torn")));
        found.extend(checks::process_context(&profiles, pid));
        if !found.is_empty() {
            failures.push(format!("{route}: {found:#?}\n{log}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn samples_carry_the_trace_and_span_their_thread_published() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = fixture(dir.path());
    let mut fixture = Fixture::spawn_path(&bin, 4.0);
    let failures = checks::spans(&mut fixture, &dir.path().join("out"));
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_library_publishing_the_context_has_it_read() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (how, dialect, relocation) in LIBRARY_BUILDS {
        eprintln!("the SDK's library {how}, -mtls-dialect={dialect}:");
        let command = library_fixture(dir.path(), how, dialect, relocation);
        let mut fixture = Fixture::spawn_command(command);
        let out = dir.path().join(format!("out-{how}-{dialect}"));
        failures.extend(
            checks::spans(&mut fixture, &out)
                .into_iter()
                .map(|f| format!("{how}, {dialect}: {f}")),
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A program in a container (its own mount and pid namespaces, an
/// overlayfs root): the SDK built into the executable, and in a library
/// the program loads by `dlopen` from the container's own root (a path
/// the host does not have). The daemon, on the host, reads the variable
/// and the records as it does a host process's.
#[test]
fn a_program_in_a_container_has_its_contexts_read() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = fixture(dir.path());
    let lib = build::cc(
        &dir.path().join("libotel_thread_ctx.so"),
        &["otel_thread_ctx.c"],
        &["-shared", "-fPIC"],
    );
    let loading = build::cc(
        &dir.path().join("trace_ctx_dl"),
        &["trace_ctx.c"],
        &["-DCTX_DLOPEN"],
    );
    let container = Container::new(&dir.path().join("root"));
    container.add(&bin, "srv/trace_ctx");
    container.add(&loading, "srv/trace_ctx_dl");
    container.add(&lib, "opt/otel/libotel_thread_ctx.so");
    container.add_libc();
    let mut failures = Vec::new();
    for comm in ["trace_ctx", "trace_ctx_dl"] {
        eprintln!("{comm}, in a container:");
        let mut command = container.command(&[format!("/srv/{comm}"), "4".into()]);
        command.env("TRACE_CTX_LIBRARY", "/opt/otel/libotel_thread_ctx.so");
        let mut fixture = Fixture::spawn_command(command);
        fixture.ids_as_the_host_sees(comm);
        let out = dir.path().join(format!("out-{comm}"));
        failures.extend(
            checks::spans(&mut fixture, &out)
                .into_iter()
                .map(|f| format!("{comm}: {f}")),
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

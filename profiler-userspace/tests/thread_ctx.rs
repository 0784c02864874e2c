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
//! library), in each TLS dialect a writer may build it with.
mod support;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
};

use profiler_userspace::output::pprof::proto;
use support::{Fixture, Profile, Profiler, build, profile_fixture, profiles, require_root};

/// Each handler, the span it runs in (trace, span; empty: none) and the
/// truth's key for its CPU time.
const HANDLERS: [(&str, &str, &str, &str); 3] = [
    (
        "handle_checkout",
        "0af7651916cd43dd8448eb211c80319c",
        "b7ad6b7169203331",
        "checkout_ns",
    ),
    (
        "handle_search",
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "00f067aa0ba902b7",
        "search_ns",
    ),
    ("between_requests", "", "", "between_ns"),
];

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
        let mut found = other_thread(&profiles, pid, fixture.tid("other"), worker);
        found.extend(torn_thread(&profiles, pid, fixture.tid("torn")));
        found.extend(process_context(&profiles, pid));
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
    let failures = spans(&mut fixture, &dir.path().join("out"));
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
            spans(&mut fixture, &out)
                .into_iter()
                .map(|f| format!("{how}, {dialect}: {f}")),
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Profiles `fixture` (its whole run) into `out`: what is wrong with the
/// spans its samples carry, against what it measured.
fn spans(fixture: &mut Fixture, out: &Path) -> Vec<String> {
    // Every 2 ms sleep kept (the sampling rule's threshold below it): the
    // comparison is of the labels, not of the sampling's spread; and ten
    // times the samples, for the shares.
    let (truth, profiles) = profile_fixture(
        fixture,
        out,
        &["--off-cpu-rate", "1ms", "--frequency", "999"],
    );
    let (pid, tid) = (fixture.pid(), fixture.tid("worker"));
    let mut failures = other_thread(&profiles, pid, fixture.tid("other"), tid);
    failures.extend(torn_thread(&profiles, pid, fixture.tid("torn")));
    failures.extend(process_context(&profiles, pid));
    let cpu_total: u64 = HANDLERS.iter().map(|h| truth[h.3]).sum();
    let mut by_handler: HashMap<&str, (i64, i64)> = HashMap::new();
    let mut off_cpu_in_checkout = 0;
    for (_, p) in &profiles {
        for s in p.samples_of(pid).filter(|s| p.is_thread(s, tid)) {
            let functions = p.functions(s);
            let Some(&(handler, trace, span, _)) =
                HANDLERS.iter().find(|h| functions.contains(&h.0))
            else {
                continue;
            };
            let labelled = ids(p, s) == (trace, span) && attrs(p, s) == route(handler);
            let samples = p.value(s, "samples");
            let entry = by_handler.entry(handler).or_default();
            entry.0 += samples;
            if labelled {
                entry.1 += samples;
                if handler == "handle_checkout" && functions.iter().any(|f| f.contains("nanosleep"))
                {
                    off_cpu_in_checkout += p.value(s, "off_cpu");
                }
            }
        }
    }
    let all: i64 = by_handler.values().map(|v| v.0).sum();
    for (handler, _, span, key) in HANDLERS {
        let (samples, labelled) = by_handler.get(handler).copied().unwrap_or_default();
        #[expect(clippy::cast_precision_loss, reason = "a percentage")]
        let want = truth[key] as f64 / cpu_total as f64 * 100.0;
        let got = percent(samples, all);
        eprintln!(
            "{handler}: {got:.1}% of the samples ({labelled} of {samples} with its span \
             {span:?}), measured {want:.1}%"
        );
        if samples == 0 || percent(labelled, samples) < 99.0 {
            failures.push(format!(
                "{handler}: {labelled} of {samples} samples with span {span:?}"
            ));
        }
        if (got - want).abs() > 5.0 {
            failures.push(format!(
                "{handler}: {got:.1}% of samples, measured {want:.1}%"
            ));
        }
    }
    #[expect(clippy::cast_precision_loss, reason = "a ratio")]
    let ratio = off_cpu_in_checkout as f64 / truth["checkout_sleep_ns"] as f64;
    eprintln!("the checkout span's sleep: {ratio:.3} of the measured time");
    if (ratio - 1.0).abs() > 0.05 {
        failures.push(format!(
            "the checkout span's off-CPU time in nanosleep is {ratio:.3} of the measured"
        ));
    }
    failures
}

/// What is wrong with the spans of the thread `other` (always in span
/// `OTHER`) and of thread `worker` (never).
fn other_thread(profiles: &[(PathBuf, Profile)], pid: u32, other: u32, worker: u32) -> Vec<String> {
    let (mut samples, mut labelled, mut crossed) = (0, 0, 0);
    for (_, p) in profiles {
        for s in p.samples_of(pid) {
            let in_other = ids(p, s) == OTHER;
            let whole = in_other && attrs(p, s) == ("/report", "GET");
            if p.is_thread(s, other) && p.functions(s).contains(&"handle_report") {
                samples += p.value(s, "samples");
                labelled += if whole { p.value(s, "samples") } else { 0 };
            }
            let in_workers = HANDLERS
                .iter()
                .any(|h| !h.1.is_empty() && ids(p, s) == (h.1, h.2));
            if (p.is_thread(s, other) && in_workers) || (p.is_thread(s, worker) && in_other) {
                crossed += p.value(s, "samples") + p.value(s, "off_cpu");
            }
        }
    }
    eprintln!("handle_report: {labelled} of {samples} samples with its span; {crossed} crossed");
    let mut failures = Vec::new();
    if samples == 0 || percent(labelled, samples) < 99.0 {
        failures.push(format!(
            "handle_report: {labelled} of {samples} samples with its span"
        ));
    }
    if crossed != 0 {
        failures.push(format!(
            "{crossed} samples (or ns) with the other thread's span"
        ));
    }
    failures
}

/// What is wrong with the thread `torn` (its record never valid): its
/// samples carry no ids, and the window counts the records not read.
fn torn_thread(profiles: &[(PathBuf, Profile)], pid: u32, torn: u32) -> Vec<String> {
    let (mut samples, mut with_ids, mut invalid) = (0, 0, 0);
    for (_, p) in profiles {
        invalid += p.comment_value("thread_ctx_records_invalid");
        for s in p.samples_of(pid).filter(|s| p.is_thread(s, torn)) {
            let n = p.value(s, "samples") + p.value(s, "off_cpu");
            if p.functions(s).contains(&"handle_torn") {
                samples += p.value(s, "samples");
            }
            if ids(p, s) != ("", "") {
                with_ids += n;
            }
        }
    }
    eprintln!(
        "handle_torn: {samples} samples, {with_ids} with ids; thread_ctx_records_invalid={invalid}"
    );
    let mut failures = Vec::new();
    if with_ids != 0 {
        failures.push(format!(
            "{with_ids} samples (or ns) of the torn record's thread with ids"
        ));
    }
    if samples == 0 || invalid < u64::try_from(samples).unwrap() {
        failures.push(format!(
            "thread_ctx_records_invalid {invalid} for {samples} samples of a torn record"
        ));
    }
    failures
}

/// What is wrong with the resource the process published (OTEP 4719):
/// every sample of the process carries each of its attributes.
fn process_context(profiles: &[(PathBuf, Profile)], pid: u32) -> Vec<String> {
    const RESOURCE: [(&str, &str); 3] = [
        ("service.name", "checkout-service"),
        ("service.instance.id", "instance-7"),
        ("deployment.environment.name", "test"),
    ];
    let (mut samples, mut with, mut read) = (0, 0, 0);
    for (_, p) in profiles {
        read += p.comment_value("process_contexts_read");
        for s in p.samples_of(pid) {
            samples += 1;
            if RESOURCE.iter().all(|(k, v)| p.str_label(s, k) == Some(v)) {
                with += 1;
            }
        }
    }
    eprintln!("process context: {with} of {samples} samples with the resource; read {read} times");
    if samples == 0 || with != samples || read == 0 {
        return vec![format!(
            "{with} of {samples} samples with the process's resource (contexts read: {read})"
        )];
    }
    Vec::new()
}

/// The attributes of `handler`'s span (none outside one).
fn route(handler: &str) -> (&'static str, &'static str) {
    match handler {
        "handle_checkout" => ("/checkout", "POST"),
        "handle_search" => ("/search", "GET"),
        _ => ("", ""),
    }
}

/// The `http_route` and `http_method` of `sample` ("" where it has none).
fn attrs<'a>(p: &'a Profile, sample: &proto::Sample) -> (&'a str, &'a str) {
    (
        p.str_label(sample, "http_route").unwrap_or_default(),
        p.str_label(sample, "http_method").unwrap_or_default(),
    )
}

/// The other thread's trace and span.
const OTHER: (&str, &str) = ("5b8aa5a2d2c872e8321cf37308d69df2", "051581bf3cb55c13");

/// The trace and span ids of `sample` ("" where it has none).
fn ids<'a>(p: &'a Profile, sample: &proto::Sample) -> (&'a str, &'a str) {
    (
        p.str_label(sample, "trace_id").unwrap_or_default(),
        p.str_label(sample, "span_id").unwrap_or_default(),
    )
}

#[expect(clippy::cast_precision_loss, reason = "a percentage")]
fn percent(part: i64, whole: i64) -> f64 {
    part as f64 / whole.max(1) as f64 * 100.0
}

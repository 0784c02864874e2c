//! OpenTelemetry's thread context (OTEP 4947) read from outside
//! (`profiler-fixtures/c/trace_ctx.c`: a plain `-O2` C program that
//! attaches a record per span to `otel_thread_ctx_v1`, exported as the
//! specification asks): every on-CPU sample in a span's handler carries
//! that span's `trace_id` and `span_id`, none outside a span does, each
//! span's share of the samples is within 5 points of the CPU time the
//! program measured, and the span's sleep is its off-CPU time, within 5%
//! of the wall time the program measured. A second thread in its own span
//! all along: its samples carry its span, and no sample of either thread
//! carries the other's; a third thread's record, never marked valid, is
//! never read and is counted. The resource the process published (OTEP
//! 4719's process context) is on every sample of the process.
mod support;

use std::collections::HashMap;

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

/// The fixture, built as the specification asks its writers to be.
fn fixture(dir: &std::path::Path) -> std::path::PathBuf {
    build::c_program_linked(
        "trace_ctx",
        dir,
        &["-Wl,--export-dynamic-symbol=otel_thread_ctx_v1"],
    )
}

/// Under `--all`, the program started after the daemon: the same
/// contexts, read from its first samples.
#[test]
fn a_program_started_under_all_has_its_contexts_read() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = fixture(dir.path());
    let out = dir.path().join("out");
    let running = Profiler::start(&[
        "--all",
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "60s",
        "--frequency",
        "999",
    ]);
    let mut fixture = Fixture::spawn_path(&bin, 3.0);
    std::thread::sleep(std::time::Duration::from_secs(1));
    fixture.go();
    fixture.results();
    let log = running.stop();
    let profiles = profiles(&out);
    let (pid, worker) = (fixture.pid(), fixture.tid("worker"));
    let mut failures = other_thread(&profiles, pid, fixture.tid("other"), worker);
    failures.extend(torn_thread(&profiles, pid, fixture.tid("torn")));
    failures.extend(process_context(&profiles, pid));
    assert!(failures.is_empty(), "{failures:#?}\n{log}");
}

#[test]
fn samples_carry_the_trace_and_span_their_thread_published() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let bin = fixture(dir.path());
    let mut fixture = Fixture::spawn_path(&bin, 4.0);
    let out = dir.path().join("out");
    // Every 2 ms sleep kept (the sampling rule's threshold below it): the
    // comparison is of the labels, not of the sampling's spread; and ten
    // times the samples, for the shares.
    let (truth, profiles) = profile_fixture(
        &mut fixture,
        &out,
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
            let labelled = ids(p, s) == (trace, span);
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
    assert!(failures.is_empty(), "{failures:#?}");
}

/// What is wrong with the spans of the thread `other` (always in span
/// `OTHER`) and of thread `worker` (never).
fn other_thread(
    profiles: &[(std::path::PathBuf, Profile)],
    pid: u32,
    other: u32,
    worker: u32,
) -> Vec<String> {
    let (mut samples, mut labelled, mut crossed) = (0, 0, 0);
    for (_, p) in profiles {
        for s in p.samples_of(pid) {
            let in_other = ids(p, s) == OTHER;
            if p.is_thread(s, other) && p.functions(s).contains(&"handle_report") {
                samples += p.value(s, "samples");
                labelled += if in_other { p.value(s, "samples") } else { 0 };
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
fn torn_thread(profiles: &[(std::path::PathBuf, Profile)], pid: u32, torn: u32) -> Vec<String> {
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
fn process_context(profiles: &[(std::path::PathBuf, Profile)], pid: u32) -> Vec<String> {
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

//! What the thread context tests check in a fixture's profiles: each
//! span's samples carry its ids and attributes, in the shares the fixture
//! measured, and nothing crosses between threads.
use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use profiler_userspace::output::pprof::proto;

use crate::support::{Fixture, Profile, profile_fixture};

/// Each handler, the span it runs in (trace, span; empty: none) and the
/// truth's key for its CPU time.
pub const HANDLERS: [(&str, &str, &str, &str); 3] = [
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

/// Profiles `fixture` (its whole run) into `out`: what is wrong with the
/// spans its samples carry, against what it measured.
pub fn spans(fixture: &mut Fixture, out: &Path) -> Vec<String> {
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
/// `OTHER`) and of thread `worker` (never). At least 99% of `other`'s
/// samples in `handle_report` carry the span; of a process found as the
/// daemon runs, those without it may be more, as many as the stacks walked
/// before the daemon read the process (`unwind_stacks_by_file`: whole, so
/// they show `handle_report`, but the thread contexts are not known yet).
pub fn other_thread(
    profiles: &[(PathBuf, Profile)],
    pid: u32,
    other: u32,
    worker: u32,
) -> Vec<String> {
    let (mut samples, mut labelled, mut crossed, mut by_file) = (0, 0, 0, 0);
    for (_, p) in profiles {
        by_file += i64::try_from(p.comment_value("unwind_stacks_by_file")).unwrap();
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
    eprintln!(
        "handle_report: {labelled} of {samples} samples with its span; {crossed} crossed; \
         {by_file} stacks walked before the process was read"
    );
    let mut failures = Vec::new();
    if samples == 0 || (percent(labelled, samples) < 99.0 && samples - labelled > by_file) {
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
pub fn torn_thread(profiles: &[(PathBuf, Profile)], pid: u32, torn: u32) -> Vec<String> {
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
pub fn process_context(profiles: &[(PathBuf, Profile)], pid: u32) -> Vec<String> {
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
pub fn route(handler: &str) -> (&'static str, &'static str) {
    match handler {
        "handle_checkout" => ("/checkout", "POST"),
        "handle_search" => ("/search", "GET"),
        _ => ("", ""),
    }
}

/// The `http_route` and `http_method` of `sample` ("" where it has none).
pub fn attrs<'a>(p: &'a Profile, sample: &proto::Sample) -> (&'a str, &'a str) {
    (
        p.str_label(sample, "http_route").unwrap_or_default(),
        p.str_label(sample, "http_method").unwrap_or_default(),
    )
}

/// The other thread's trace and span.
pub const OTHER: (&str, &str) = ("5b8aa5a2d2c872e8321cf37308d69df2", "051581bf3cb55c13");

/// The trace and span ids of `sample` ("" where it has none).
pub fn ids<'a>(p: &'a Profile, sample: &proto::Sample) -> (&'a str, &'a str) {
    (
        p.str_label(sample, "trace_id").unwrap_or_default(),
        p.str_label(sample, "span_id").unwrap_or_default(),
    )
}

#[expect(clippy::cast_precision_loss, reason = "a percentage")]
pub fn percent(part: i64, whole: i64) -> f64 {
    part as f64 / whole.max(1) as f64 * 100.0
}

//! The request bodies of each protocol, built from a push's series.
//!
//! Pyroscope's messages are written here from `api/push/v1/push.proto` and
//! `api/types/v1/types.proto` (grafana/pyroscope); Parca's gateway takes
//! `WriteRawRequest` (parca-dev/parca
//! `proto/parca/profilestore/v1alpha1/profilestore.proto`) as protobuf
//! JSON; OTLP's come from the `opentelemetry-proto` crate (`otlp.rs`).
use base64::Engine as _;
use prost::Message as _;

use super::{
    otlp,
    series::{MAX_PROFILE_ROWS, Series, even_chunks},
};
use crate::{
    config::PushProtocol,
    output::pprof,
    profile::{Profile, Sample, View},
};

/// Largest body a request is built to (more series go in further
/// requests): below Pyroscope's default ingestion burst of 2 MB.
pub const MAX_BODY: usize = 1 << 20;

/// The three profile types pushed for every program.
const VIEWS: [View; 3] = [View::Cpu, View::OffCpu, View::Wall];

/// `__name__` of a view in Pyroscope: those Grafana Alloy's eBPF profiler
/// pushes (`process_cpu`, `offcpu`) and the wall-clock type of Pyroscope's
/// own SDKs (`wall`).
fn pyroscope_name(view: View) -> &'static str {
    match view {
        View::Cpu => "process_cpu",
        View::OffCpu => "offcpu",
        View::Wall => "wall",
    }
}

/// `__name__` in Parca: parca-agent's own; its sample types set the views
/// apart (`samples`/`cpu`, `off_cpu_events`/`off_cpu`, `wall`).
const PARCA_NAME: &str = "parca_agent";

#[derive(Clone, PartialEq, prost::Message)]
struct PushRequest {
    #[prost(message, repeated, tag = "1")]
    series: Vec<RawProfileSeries>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawProfileSeries {
    #[prost(message, repeated, tag = "1")]
    labels: Vec<LabelPair>,
    #[prost(message, repeated, tag = "2")]
    samples: Vec<RawSample>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct LabelPair {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawSample {
    #[prost(bytes = "vec", tag = "1")]
    raw_profile: Vec<u8>,
    #[prost(string, tag = "2")]
    id: String,
}

/// Largest pprof, uncompressed: Pyroscope's default
/// `validation.max-profile-size-bytes` (4 MiB), refused likewise.
const MAX_PROFILE_BYTES: usize = 4 << 20;

/// A series' view as gzip'd pprofs of that view's sample types: one, or
/// for a program with more rows than a backend takes in one profile,
/// several of its rows each; none when the program has no rows of that
/// kind.
fn view_pprofs(series: &Series, view: View) -> Vec<Vec<u8>> {
    let whole = &series.profile;
    let samples: Vec<_> = whole.samples.iter().filter(|s| s.in_view(view)).collect();
    let mut pprofs = Vec::new();
    if samples.is_empty() {
        return pprofs;
    }
    for rows in even_chunks(&samples, MAX_PROFILE_ROWS) {
        encode_within_limit(whole, view, rows, &mut pprofs);
    }
    pprofs
}

/// Encodes `rows` as one pprof, or halves them until each half is within
/// [`MAX_PROFILE_BYTES`] (a single row goes as it is).
fn encode_within_limit(whole: &Profile, view: View, rows: &[&Sample], out: &mut Vec<Vec<u8>>) {
    let profile = Profile {
        view,
        start: whole.start,
        duration_ns: whole.duration_ns,
        period_ns: whole.period_ns,
        samples: rows.iter().map(|&s| s.clone()).collect(),
        comments: whole.comments.clone(),
    };
    let encoded = pprof::encode_view(&profile);
    if encoded.len() > MAX_PROFILE_BYTES && rows.len() > 1 {
        let (first, second) = rows.split_at(rows.len() / 2);
        encode_within_limit(whole, view, first, out);
        encode_within_limit(whole, view, second, out);
        return;
    }
    // Gzip into memory cannot fail.
    out.extend(pprof::gzip(&encoded).ok());
}

/// One labelled, gzip'd pprof: what Pyroscope and Parca take.
struct Part {
    labels: Vec<(String, String)>,
    pprof: Vec<u8>,
}

/// Every series' views as labelled pprofs, `__name__` first.
fn parts(series: &[Series], name: impl Fn(View) -> &'static str) -> Vec<Part> {
    let mut parts = Vec::new();
    for one in series {
        for view in VIEWS {
            for pprof in view_pprofs(one, view) {
                let mut labels = vec![("__name__".to_owned(), name(view).to_owned())];
                labels.extend(one.labels.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
                parts.push(Part { labels, pprof });
            }
        }
    }
    parts
}

/// Groups `parts` in order into batches of at most [`MAX_BODY`] bytes of
/// pprof (a larger part goes alone).
fn batches(parts: Vec<Part>) -> Vec<Vec<Part>> {
    let mut batches: Vec<Vec<Part>> = Vec::new();
    let mut size = 0;
    for part in parts {
        let len = part.pprof.len();
        match batches.last_mut() {
            Some(batch) if size + len <= MAX_BODY => batch.push(part),
            _ => {
                batches.push(vec![part]);
                size = 0;
            }
        }
        size += len;
    }
    batches
}

fn pyroscope_body(batch: Vec<Part>) -> Vec<u8> {
    PushRequest {
        series: batch
            .into_iter()
            .map(|part| RawProfileSeries {
                labels: part
                    .labels
                    .into_iter()
                    .map(|(name, value)| LabelPair { name, value })
                    .collect(),
                samples: vec![RawSample {
                    raw_profile: part.pprof,
                    id: String::new(),
                }],
            })
            .collect(),
    }
    .encode_to_vec()
}

fn parca_body(batch: Vec<Part>, tenant: Option<&str>) -> Vec<u8> {
    let series: Vec<_> = batch
        .into_iter()
        .map(|part| {
            let labels: Vec<_> = part
                .labels
                .into_iter()
                .map(|(name, value)| serde_json::json!({ "name": name, "value": value }))
                .collect();
            let raw = base64::engine::general_purpose::STANDARD.encode(&part.pprof);
            serde_json::json!({
                "labels": { "labels": labels },
                "samples": [{ "rawProfile": raw }],
            })
        })
        .collect();
    let request = serde_json::json!({
        "tenant": tenant.unwrap_or_default(),
        "series": series,
        "normalized": false,
    });
    request.to_string().into_bytes()
}

/// The request bodies that push `series` with `protocol`, in order.
#[must_use]
pub fn bodies(protocol: PushProtocol, series: &[Series], tenant: Option<&str>) -> Vec<Vec<u8>> {
    match protocol {
        PushProtocol::Pyroscope => batches(parts(series, pyroscope_name))
            .into_iter()
            .map(pyroscope_body)
            .collect(),
        PushProtocol::Parca => batches(parts(series, |_| PARCA_NAME))
            .into_iter()
            .map(|batch| parca_body(batch, tenant))
            .collect(),
        PushProtocol::Otlp => otlp::bodies(series),
    }
}

#[cfg(test)]
mod label_tests;
#[cfg(test)]
mod tests;

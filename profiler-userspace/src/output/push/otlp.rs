//! A push's series as OTLP profiles (`ExportProfilesServiceRequest`, the
//! `opentelemetry-proto` crate's types): one resource per program, one
//! profile per sample type (`cpu`, `off_cpu`, `wall`, with `--wakers`
//! `off_cpu_wakers` and `critical_path`, with `--goroutine-wakers`
//! `goroutine_wakers`), all sharing one
//! dictionary per request. Converted row for row from the symbolized
//! profile: nothing is re-sampled.
mod dictionary;

use std::{borrow::Cow, time::UNIX_EPOCH};

use opentelemetry_proto::tonic::{
    collector::profiles::v1development::ExportProfilesServiceRequest,
    common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value},
    profiles::v1development as otlp,
    resource::v1::Resource,
};
use prost::Message as _;

use dictionary::Dictionary;

use super::series::{MAX_PROFILE_ROWS, Series};
use crate::{output::pprof, profile::Sample};

/// Series per request (each request carries its own dictionary).
const SERIES_PER_REQUEST: usize = 64;

/// Largest request, uncompressed. The collector's OTLP/HTTP receiver
/// refuses a whole request past its `max_request_body_size` (20 MiB by
/// default, counted after gunzip, confighttp); requests stay well under
/// it, at the size of the largest profile Pyroscope takes.
const MAX_REQUEST_BYTES: usize = 4 << 20;

/// The value of a row (given the on-CPU sampling period) for one profile.
type ValueOf = fn(&Sample, u64) -> u64;

/// (type, unit) of each profile, and the row's value for it.
const TYPES: [(&str, &str, ValueOf); 6] = [
    ("cpu", "nanoseconds", |s, period| {
        s.samples.saturating_mul(period)
    }),
    ("off_cpu", "nanoseconds", |s, _| s.off_cpu_ns),
    ("wall", "nanoseconds", |s, period| s.wall_ns(period)),
    ("off_cpu_wakers", "nanoseconds", |s, _| s.waker_ns),
    ("critical_path", "nanoseconds", |s, _| s.critical_ns),
    ("goroutine_wakers", "nanoseconds", |s, _| {
        s.goroutine_waker_ns
    }),
];

/// Gzip'd `ExportProfilesServiceRequest`s for `series`, in order, each
/// within [`MAX_REQUEST_BYTES`]. A program of more rows than Pyroscope takes
/// in one profile (its OTLP intake checks each as a pprof) goes as several
/// resources of the same attributes.
#[must_use]
pub fn bodies(series: &[Series]) -> Vec<Vec<u8>> {
    let mut pieces: Vec<Cow<'_, Series>> = Vec::with_capacity(series.len());
    for one in series {
        if one.profile.samples.len() <= MAX_PROFILE_ROWS {
            pieces.push(Cow::Borrowed(one));
        } else {
            pieces.extend(one.pieces(MAX_PROFILE_ROWS).into_iter().map(Cow::Owned));
        }
    }
    let mut bodies = Vec::new();
    for chunk in pieces.chunks(SERIES_PER_REQUEST) {
        encode_within_limit(chunk, &mut bodies);
    }
    bodies
}

/// Encodes `series` as one gzip'd request, or halves them (a single series
/// by its rows) until each half is within [`MAX_REQUEST_BYTES`]; a single
/// row goes as it is.
fn encode_within_limit(series: &[Cow<'_, Series>], out: &mut Vec<Vec<u8>>) {
    let encoded = request(series.iter().map(AsRef::as_ref)).encode_to_vec();
    if encoded.len() > MAX_REQUEST_BYTES {
        match series {
            [_, _, ..] => {
                let (first, second) = series.split_at(series.len() / 2);
                encode_within_limit(first, out);
                encode_within_limit(second, out);
                return;
            }
            [one] if one.profile.samples.len() > 1 => {
                let half = one.profile.samples.len().div_ceil(2);
                for piece in one.pieces(half) {
                    encode_within_limit(&[Cow::Owned(piece)], out);
                }
                return;
            }
            _ => {}
        }
    }
    // Gzip into memory cannot fail.
    out.extend(pprof::gzip(&encoded).ok());
}

/// One request for `series`.
#[must_use]
pub fn request<'a>(series: impl IntoIterator<Item = &'a Series>) -> ExportProfilesServiceRequest {
    let mut dictionary = Dictionary::new();
    let resource_profiles = series
        .into_iter()
        .map(|one| resource_profiles(one, &mut dictionary))
        .collect();
    ExportProfilesServiceRequest {
        resource_profiles,
        dictionary: Some(dictionary.tables),
    }
}

fn string_value(value: &str) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(value.to_owned())),
    }
}

/// The resource attributes of a series: OpenTelemetry's names for its labels.
fn resource(series: &Series) -> Resource {
    let attributes = series
        .labels
        .iter()
        .map(|(name, value)| KeyValue {
            key: match *name {
                "service_name" => "service.name",
                "hostname" => "host.name",
                "container_id" => "container.id",
                "container_runtime" => "container.runtime",
                "pod_uid" => "k8s.pod.uid",
                "cgroup" => "process.linux.cgroup",
                other => other,
            }
            .to_owned(),
            value: Some(string_value(value)),
            ..KeyValue::default()
        })
        .collect();
    Resource {
        attributes,
        ..Resource::default()
    }
}

fn resource_profiles(series: &Series, dictionary: &mut Dictionary) -> otlp::ResourceProfiles {
    let whole = &series.profile;
    let time_unix_nano = whole
        .start
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let mut profiles = Vec::new();
    for (ty, unit, value) in TYPES {
        let samples: Vec<otlp::Sample> = whole
            .samples
            .iter()
            .filter_map(|row| {
                let v = value(row, whole.period_ns);
                (v != 0).then(|| dictionary.sample(row, v))
            })
            .collect();
        if samples.is_empty() {
            continue;
        }
        let sample_type = Some(dictionary.value_type(ty, unit));
        let cpu = ty == "cpu";
        profiles.push(otlp::Profile {
            sample_type,
            samples,
            time_unix_nano,
            duration_nano: whole.duration_ns,
            period_type: cpu.then(|| dictionary.value_type("cpu", "nanoseconds")),
            period: if cpu {
                i64::try_from(whole.period_ns).unwrap_or(i64::MAX)
            } else {
                0
            },
            ..otlp::Profile::default()
        });
    }
    otlp::ResourceProfiles {
        resource: Some(resource(series)),
        scope_profiles: vec![otlp::ScopeProfiles {
            scope: Some(InstrumentationScope {
                name: "profiler".to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                ..InstrumentationScope::default()
            }),
            profiles,
            schema_url: String::new(),
        }],
        schema_url: String::new(),
    }
}

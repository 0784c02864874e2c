//! A push's series as OTLP profiles (`ExportProfilesServiceRequest`, the
//! `opentelemetry-proto` crate's types): one resource per program, one
//! profile per sample type (`cpu`, `off_cpu`, `wall`), all sharing one
//! dictionary per request. Converted row for row from the symbolized
//! profile: nothing is re-sampled.
use std::{borrow::Cow, collections::HashMap, sync::Arc, time::UNIX_EPOCH};

use opentelemetry_proto::tonic::{
    collector::profiles::v1development::ExportProfilesServiceRequest,
    common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value},
    profiles::v1development as otlp,
    resource::v1::Resource,
};
use prost::Message as _;

use super::series::{MAX_PROFILE_ROWS, Series};
use crate::{
    output::pprof,
    profile::{Line, Location, Mapping, Sample},
    sample::LabelValue,
};

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
const TYPES: [(&str, &str, ValueOf); 3] = [
    ("cpu", "nanoseconds", |s, period| {
        s.samples.saturating_mul(period)
    }),
    ("off_cpu", "nanoseconds", |s, _| s.off_cpu_ns),
    ("wall", "nanoseconds", |s, period| s.wall_ns(period)),
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

/// The request's shared tables, each with its zero value at index 0, and
/// indices of what they hold.
struct Dictionary {
    tables: otlp::ProfilesDictionary,
    strings: HashMap<String, i32>,
    functions: HashMap<(String, String), i32>,
    mappings: HashMap<Arc<Mapping>, i32>,
    locations: HashMap<(i32, u64, Arc<[Line]>), i32>,
    stacks: HashMap<Vec<i32>, i32>,
    attributes: HashMap<(i32, Attribute), i32>,
    links: HashMap<(Vec<u8>, Vec<u8>), i32>,
}

/// An attribute value that can be interned.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Attribute {
    Int(i64),
    Str(String),
}

fn index(len: usize) -> i32 {
    i32::try_from(len).unwrap_or(i32::MAX)
}

impl Dictionary {
    fn new() -> Self {
        let tables = otlp::ProfilesDictionary {
            mapping_table: vec![otlp::Mapping::default()],
            location_table: vec![otlp::Location::default()],
            function_table: vec![otlp::Function::default()],
            link_table: vec![otlp::Link::default()],
            string_table: vec![String::new()],
            attribute_table: vec![otlp::KeyValueAndUnit::default()],
            stack_table: vec![otlp::Stack::default()],
        };
        Self {
            tables,
            strings: HashMap::from([(String::new(), 0)]),
            functions: HashMap::new(),
            mappings: HashMap::new(),
            locations: HashMap::new(),
            stacks: HashMap::from([(Vec::new(), 0)]),
            attributes: HashMap::new(),
            links: HashMap::new(),
        }
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = index(self.tables.string_table.len());
        self.tables.string_table.push(s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }

    fn value_type(&mut self, ty: &str, unit: &str) -> otlp::ValueType {
        otlp::ValueType {
            type_strindex: self.string(ty),
            unit_strindex: self.string(unit),
        }
    }

    fn attribute(&mut self, key: &str, value: Attribute) -> i32 {
        let key = self.string(key);
        if let Some(&i) = self.attributes.get(&(key, value.clone())) {
            return i;
        }
        let any = match &value {
            Attribute::Int(n) => any_value::Value::IntValue(*n),
            Attribute::Str(s) => any_value::Value::StringValue(s.clone()),
        };
        let i = index(self.tables.attribute_table.len());
        self.tables.attribute_table.push(otlp::KeyValueAndUnit {
            key_strindex: key,
            value: Some(AnyValue { value: Some(any) }),
            unit_strindex: 0,
        });
        self.attributes.insert((key, value), i);
        i
    }

    fn function(&mut self, line: &Line) -> i32 {
        let key = (line.function.clone(), line.file.clone());
        if let Some(&i) = self.functions.get(&key) {
            return i;
        }
        let name = self.string(&line.function);
        let file = self.string(&line.file);
        let i = index(self.tables.function_table.len());
        self.tables.function_table.push(otlp::Function {
            name_strindex: name,
            system_name_strindex: name,
            filename_strindex: file,
            start_line: 0,
        });
        self.functions.insert(key, i);
        i
    }

    fn mapping(&mut self, mapping: &Arc<Mapping>) -> i32 {
        if let Some(&i) = self.mappings.get(mapping) {
            return i;
        }
        let filename = self.string(&mapping.file);
        let mut attribute_indices = Vec::new();
        if !mapping.build_id.is_empty() {
            attribute_indices.push(self.attribute(
                "process.executable.build_id.gnu",
                Attribute::Str(mapping.build_id.clone()),
            ));
        }
        let i = index(self.tables.mapping_table.len());
        self.tables.mapping_table.push(otlp::Mapping {
            memory_start: mapping.start,
            memory_limit: mapping.limit,
            file_offset: mapping.file_offset,
            filename_strindex: filename,
            attribute_indices,
        });
        self.mappings.insert(mapping.clone(), i);
        i
    }

    fn location(&mut self, location: &Location) -> i32 {
        let mapping = location.mapping.as_ref().map_or(0, |m| self.mapping(m));
        let key = (mapping, location.address, location.lines.clone());
        if let Some(&i) = self.locations.get(&key) {
            return i;
        }
        let lines = location
            .lines
            .iter()
            .map(|line| otlp::Line {
                function_index: self.function(line),
                line: i64::from(line.line),
                column: 0,
            })
            .collect();
        let i = index(self.tables.location_table.len());
        self.tables.location_table.push(otlp::Location {
            mapping_index: mapping,
            address: location.address,
            lines,
            attribute_indices: Vec::new(),
        });
        self.locations.insert(key, i);
        i
    }

    fn stack(&mut self, stack: &[Location]) -> i32 {
        let locations: Vec<i32> = stack.iter().map(|l| self.location(l)).collect();
        if let Some(&i) = self.stacks.get(&locations) {
            return i;
        }
        let i = index(self.tables.stack_table.len());
        self.tables.stack_table.push(otlp::Stack {
            location_indices: locations.clone(),
        });
        self.stacks.insert(locations, i);
        i
    }

    /// The link of a trace and span (W3C hex) in the table.
    fn link(&mut self, trace: &str, span: &str) -> i32 {
        let bytes = |hex: &str| -> Vec<u8> {
            (0..hex.len() / 2)
                .filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
                .collect()
        };
        let key = (bytes(trace), bytes(span));
        if let Some(&i) = self.links.get(&key) {
            return i;
        }
        let i = index(self.tables.link_table.len());
        self.tables.link_table.push(otlp::Link {
            trace_id: key.0.clone(),
            span_id: key.1.clone(),
        });
        self.links.insert(key, i);
        i
    }

    /// A row as a sample with one value; its pid, tid, names and state as
    /// attributes (OpenTelemetry's names where there are some), unless a
    /// runtime's labels stand for the thread (a goroutine's id, status and
    /// wait reason), then the runtime's labels.
    fn sample(&mut self, row: &Sample, value: u64) -> otlp::Sample {
        let stack_index = self.stack(&row.stack);
        let mut attribute_indices = vec![
            self.attribute("process.pid", Attribute::Int(i64::from(row.pid))),
            self.attribute(
                "process.executable.name",
                Attribute::Str(row.comm.to_string()),
            ),
        ];
        let runtime = row.labels.as_deref();
        if !runtime.is_some_and(|r| r.replaces_thread) {
            attribute_indices.extend([
                self.attribute("thread.id", Attribute::Int(i64::from(row.tid))),
                self.attribute("thread.name", Attribute::Str(row.thread.clone())),
                self.attribute("thread.state", Attribute::Str(row.state.label().to_owned())),
            ]);
        }
        // A trace and span are the sample's link, as OTLP keeps them (a
        // `span_id` alone, a Go program's own label, stays an attribute).
        let id = |key: &str| {
            runtime
                .iter()
                .flat_map(|r| &r.labels)
                .find_map(|l| match &l.value {
                    LabelValue::Str(id) if l.key == key => Some(Arc::clone(id)),
                    _ => None,
                })
        };
        let link = id("trace_id").zip(id("span_id"));
        for label in runtime.iter().flat_map(|r| &r.labels) {
            if link.is_some() && matches!(label.key.as_ref(), "trace_id" | "span_id") {
                continue;
            }
            let value = match &label.value {
                LabelValue::Num(num) => Attribute::Int(*num),
                LabelValue::Str(value) => Attribute::Str(value.to_string()),
                LabelValue::Static(value) => Attribute::Str((*value).to_owned()),
            };
            attribute_indices.push(self.attribute(&label.attribute, value));
        }
        attribute_indices.sort_unstable();
        let link_index = link.map_or(0, |(trace, span)| self.link(&trace, &span));
        otlp::Sample {
            stack_index,
            attribute_indices,
            link_index,
            values: vec![i64::try_from(value).unwrap_or(i64::MAX)],
            timestamps_unix_nano: Vec::new(),
        }
    }
}

//! Request bodies → [`Received`] profiles, refusing what the real server
//! would refuse.
use std::{collections::BTreeMap, io::Read as _};

use base64::Engine as _;
use opentelemetry_proto::tonic::{
    collector::profiles::v1development::ExportProfilesServiceRequest, common::v1::any_value::Value,
    profiles::v1development as otlp,
};
use prost::Message as _;
use pyroscope::encode::r#gen::{google, push};

use super::received::{Protocol, Received, ReceivedSample};

/// Decodes one request body as `protocol`'s server would.
///
/// # Errors
/// What the server would answer 400 with.
pub fn decode(protocol: Protocol, body: &[u8]) -> Result<Vec<Received>, String> {
    match protocol {
        Protocol::Pyroscope => pyroscope(body),
        Protocol::Parca => parca(body),
        Protocol::Otlp => otlp_request(&gunzip_within(body, OTLP_MAX_BODY)?),
    }
}

/// The collector's OTLP/HTTP receiver refuses a body past its
/// `max_request_body_size` (confighttp's default), counted after gunzip.
const OTLP_MAX_BODY: u64 = 20 << 20;

fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    gunzip_within(bytes, u64::MAX)
}

fn gunzip_within(bytes: &[u8], limit: u64) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| format!("gzip: {e}"))?;
    if out.len() as u64 > limit {
        return Err(format!(
            "request body too large: over {limit} bytes once decompressed"
        ));
    }
    Ok(out)
}

/// Gzip'd or not, told by the magic bytes (as Parca and Pyroscope do).
fn maybe_gunzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        gunzip(bytes)
    } else {
        Ok(bytes.to_vec())
    }
}

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Pyroscope's `ValidateLabels` (pkg/validation/validate.go) with its
/// default limits: at least one label, at most 30, a valid `__name__`, a
/// `service_name`, valid and unique names, names up to 1024 and values up
/// to 2048 bytes.
fn pyroscope_labels(pairs: &[(String, String)]) -> Result<BTreeMap<String, String>, String> {
    if pairs.is_empty() {
        return Err("at least one label pair is required per profile".into());
    }
    if pairs.len() > 30 {
        return Err(format!("{} label names; limit 30", pairs.len()));
    }
    let mut labels = BTreeMap::new();
    for (name, value) in pairs {
        if name.len() > 1024 || value.len() > 2048 {
            return Err(format!("label {name} too long"));
        }
        if !is_label_name(name) {
            return Err(format!("invalid label name '{name}'"));
        }
        if labels.insert(name.clone(), value.clone()).is_some() {
            return Err(format!("duplicate label name: '{name}'"));
        }
    }
    if !labels.get("__name__").is_some_and(|n| is_metric_name(n)) {
        return Err("invalid metric name".into());
    }
    if labels.get("service_name").is_none_or(String::is_empty) {
        return Err("service name is not provided".into());
    }
    Ok(labels)
}

fn pyroscope(body: &[u8]) -> Result<Vec<Received>, String> {
    let request = push::PushRequest::decode(body).map_err(|e| format!("protobuf: {e}"))?;
    let mut out = Vec::new();
    for series in request.series {
        let pairs: Vec<_> = series
            .labels
            .iter()
            .map(|l| (l.name.clone(), l.value.clone()))
            .collect();
        let labels = pyroscope_labels(&pairs)?;
        for sample in series.samples {
            let bytes = maybe_gunzip(&sample.raw_profile)?;
            let profile = pprof(&bytes)?;
            pyroscope_limits(bytes.len(), &profile)?;
            out.push(Received {
                labels: labels.clone(),
                ..profile
            });
        }
    }
    Ok(out)
}

/// Pyroscope's `ValidateProfile` (pkg/validation/validate.go) with its
/// default limits (pkg/validation/limits.go): a profile of at most 4 MiB
/// uncompressed and 16000 samples, each with at most 100 labels. It
/// refuses the whole request for one profile past them.
fn pyroscope_limits(uncompressed: usize, profile: &Received) -> Result<(), String> {
    const MAX_BYTES: usize = 4 * 1024 * 1024;
    const MAX_SAMPLES: usize = 16_000;
    const MAX_SAMPLE_LABELS: usize = 100;
    if uncompressed > MAX_BYTES {
        return Err(format!(
            "profile too big: {uncompressed} bytes uncompressed; limit {MAX_BYTES}"
        ));
    }
    if profile.samples.len() > MAX_SAMPLES {
        return Err(format!(
            "profile has {} samples; limit {MAX_SAMPLES}",
            profile.samples.len()
        ));
    }
    if let Some(s) = profile
        .samples
        .iter()
        .find(|s| s.labels.len() > MAX_SAMPLE_LABELS)
    {
        return Err(format!(
            "a sample has {} labels; limit {MAX_SAMPLE_LABELS}",
            s.labels.len()
        ));
    }
    Ok(())
}

/// Parca's gateway: `WriteRawRequest` as protobuf JSON; `__name__`
/// required (its normalizer).
fn parca(body: &[u8]) -> Result<Vec<Received>, String> {
    let request: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("JSON: {e}"))?;
    let known = ["tenant", "series", "normalized"];
    if let Some(unknown) = request
        .as_object()
        .ok_or("not an object")?
        .keys()
        .find(|k| !known.contains(&k.as_str()))
    {
        return Err(format!("unknown field {unknown:?} in WriteRawRequest"));
    }
    let mut out = Vec::new();
    for series in request["series"].as_array().ok_or("no series")? {
        let mut labels = BTreeMap::new();
        for label in series["labels"]["labels"].as_array().ok_or("no labels")? {
            let name = label["name"].as_str().ok_or("label without name")?;
            let value = label["value"].as_str().unwrap_or_default();
            labels.insert(name.to_owned(), value.to_owned());
        }
        if !labels.get("__name__").is_some_and(|n| is_metric_name(n)) {
            return Err("__name__ label is required".into());
        }
        for sample in series["samples"].as_array().ok_or("no samples")? {
            let raw = sample["rawProfile"]
                .as_str()
                .ok_or("sample without rawProfile")?;
            let raw = base64::engine::general_purpose::STANDARD
                .decode(raw)
                .map_err(|e| format!("rawProfile base64: {e}"))?;
            let profile = pprof(&maybe_gunzip(&raw)?)?;
            out.push(Received {
                labels: labels.clone(),
                ..profile
            });
        }
    }
    Ok(out)
}

/// A pprof, decoded with Grafana's generated types and held to the rules
/// of both servers: `string_table[0] == ""`, every index in range, ids
/// sequential from 1 (Parca's normalizer), no `-` in a sample type
/// (Pyroscope's `ValidateProfile`), one value per sample type.
fn pprof(bytes: &[u8]) -> Result<Received, String> {
    let p = google::Profile::decode(bytes).map_err(|e| format!("pprof: {e}"))?;
    if p.string_table.first().is_none_or(|s| !s.is_empty()) {
        return Err("string_table[0] must be \"\"".into());
    }
    let string = |i: i64| -> Result<String, String> {
        usize::try_from(i)
            .ok()
            .and_then(|i| p.string_table.get(i))
            .cloned()
            .ok_or_else(|| format!("string index {i} out of range"))
    };
    for (what, ids) in [
        (
            "mapping",
            p.mapping.iter().map(|m| m.id).collect::<Vec<_>>(),
        ),
        ("location", p.location.iter().map(|l| l.id).collect()),
        ("function", p.function.iter().map(|f| f.id).collect()),
    ] {
        if ids.iter().zip(1..).any(|(&id, n)| id != n) {
            return Err(format!("{what} ids must be sequential from 1"));
        }
    }
    let mut types = Vec::new();
    for t in &p.sample_type {
        let name = string(t.r#type)?;
        if name.contains('-') {
            return Err("sample type contains -".into());
        }
        types.push((name, string(t.unit)?));
    }
    let function = |id: u64| -> Result<String, String> {
        let f = usize::try_from(id)
            .ok()
            .and_then(|i| p.function.get(i.wrapping_sub(1)))
            .ok_or_else(|| format!("function id {id} out of range"))?;
        string(f.name)
    };
    let mut samples = Vec::new();
    for s in &p.sample {
        if s.value.len() != types.len() {
            return Err("a sample's values do not match its sample types".into());
        }
        let mut functions = Vec::new();
        for &id in &s.location_id {
            let location = usize::try_from(id)
                .ok()
                .and_then(|i| p.location.get(i.wrapping_sub(1)))
                .ok_or_else(|| format!("location id {id} out of range"))?;
            if location.mapping_id > p.mapping.len() as u64 {
                return Err(format!("mapping id {} out of range", location.mapping_id));
            }
            for line in &location.line {
                functions.push(function(line.function_id)?);
            }
        }
        let mut labels = BTreeMap::new();
        for l in &s.label {
            let value = if l.str == 0 {
                l.num.to_string()
            } else {
                string(l.str)?
            };
            labels.insert(string(l.key)?, value);
        }
        samples.push(ReceivedSample {
            functions,
            values: s.value.clone(),
            labels,
        });
    }
    Ok(Received {
        labels: BTreeMap::new(),
        time_nanos: p.time_nanos,
        types,
        samples,
    })
}

/// OTLP profiles: the dictionary's tables each start with their zero value,
/// every index is in range, and a sample has one value per profile.
fn otlp_request(body: &[u8]) -> Result<Vec<Received>, String> {
    let request =
        ExportProfilesServiceRequest::decode(body).map_err(|e| format!("protobuf: {e}"))?;
    let d = request.dictionary.ok_or("no dictionary")?;
    check_zero_values(&d)?;
    let string = |i: i32| -> Result<String, String> {
        usize::try_from(i)
            .ok()
            .and_then(|i| d.string_table.get(i))
            .cloned()
            .ok_or_else(|| format!("string index {i} out of range"))
    };
    let get = |i: i32, len: usize, what: &str| -> Result<usize, String> {
        usize::try_from(i)
            .ok()
            .filter(|&i| i < len)
            .ok_or_else(|| format!("{what} index {i} out of range"))
    };
    let mut out = Vec::new();
    for resource in request.resource_profiles {
        let mut labels = BTreeMap::new();
        for kv in resource.resource.map(|r| r.attributes).unwrap_or_default() {
            let name = match kv.key.as_str() {
                "service.name" => "service_name",
                "host.name" => "hostname",
                "container.id" => "container_id",
                other => other,
            };
            if let Some(Value::StringValue(v)) = kv.value.and_then(|v| v.value) {
                labels.insert(name.to_owned(), v);
            }
        }
        if labels.get("service_name").is_none_or(String::is_empty) {
            return Err("a resource without service.name".into());
        }
        for scope in resource.scope_profiles {
            for profile in scope.profiles {
                let ty = profile.sample_type.ok_or("a profile without sample_type")?;
                let types = vec![(string(ty.type_strindex)?, string(ty.unit_strindex)?)];
                let mut samples = Vec::new();
                for s in &profile.samples {
                    if s.values.len() != 1 {
                        return Err("a sample's values do not match its sample type".into());
                    }
                    let stack = &d.stack_table[get(s.stack_index, d.stack_table.len(), "stack")?];
                    let mut functions = Vec::new();
                    for &l in &stack.location_indices {
                        let location =
                            &d.location_table[get(l, d.location_table.len(), "location")?];
                        get(location.mapping_index, d.mapping_table.len(), "mapping")?;
                        for line in &location.lines {
                            let f = get(line.function_index, d.function_table.len(), "function")?;
                            functions.push(string(d.function_table[f].name_strindex)?);
                        }
                    }
                    let mut attributes = BTreeMap::new();
                    for &a in &s.attribute_indices {
                        let kv = &d.attribute_table[get(a, d.attribute_table.len(), "attribute")?];
                        let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                            Some(Value::StringValue(s)) => s.clone(),
                            Some(Value::IntValue(n)) => n.to_string(),
                            other => format!("{other:?}"),
                        };
                        attributes.insert(string(kv.key_strindex)?, value);
                    }
                    // A link: the trace and span, as W3C hex, with the
                    // attributes (the link table's rule: 16 and 8 bytes).
                    if s.link_index != 0 {
                        let link = &d.link_table[get(s.link_index, d.link_table.len(), "link")?];
                        if link.trace_id.len() != 16 || link.span_id.len() != 8 {
                            return Err("a link whose ids are not 16 and 8 bytes".into());
                        }
                        let hex = |b: &[u8]| {
                            b.iter().fold(String::new(), |mut out, x| {
                                let _ =
                                    std::fmt::Write::write_fmt(&mut out, format_args!("{x:02x}"));
                                out
                            })
                        };
                        attributes.insert("trace_id".to_owned(), hex(&link.trace_id));
                        attributes.insert("span_id".to_owned(), hex(&link.span_id));
                    }
                    samples.push(ReceivedSample {
                        functions,
                        values: s.values.clone(),
                        labels: attributes,
                    });
                }
                out.push(Received {
                    labels: labels.clone(),
                    time_nanos: i64::try_from(profile.time_unix_nano).unwrap_or(i64::MAX),
                    types,
                    samples,
                });
            }
        }
    }
    Ok(out)
}

fn check_zero_values(d: &otlp::ProfilesDictionary) -> Result<(), String> {
    let zero = [
        (
            "mapping",
            d.mapping_table.first() == Some(&otlp::Mapping::default()),
        ),
        (
            "location",
            d.location_table.first() == Some(&otlp::Location::default()),
        ),
        (
            "function",
            d.function_table.first() == Some(&otlp::Function::default()),
        ),
        ("link", d.link_table.first() == Some(&otlp::Link::default())),
        (
            "string",
            d.string_table.first().is_some_and(String::is_empty),
        ),
        (
            "attribute",
            d.attribute_table.first() == Some(&otlp::KeyValueAndUnit::default()),
        ),
        (
            "stack",
            d.stack_table.first() == Some(&otlp::Stack::default()),
        ),
    ];
    match zero.iter().find(|(_, ok)| !ok) {
        Some((table, _)) => Err(format!(
            "{table}_table[0] must be present and the zero value"
        )),
        None => Ok(()),
    }
}

//! OpenTelemetry's process context (OTEP 4719): an SDK publishes its
//! resource attributes (`service.name`, `service.instance.id`, ...) in a
//! mapping named `OTEL_CTX` (a memfd's, or anonymous memory named with
//! `prctl`): a header, then a protobuf `ProcessContext` that the header
//! points at (the resource, and extra attributes such as OTEP 4947's
//! `threadlocal.attribute_key_map`). [`find`] notes the mapping in the
//! text of `/proc/PID/maps`, and [`read`] reads the attributes as the
//! specification's reading protocol says (signature, version, a nonzero
//! publication time that has not changed once the payload is read).
use opentelemetry_proto::tonic::{
    common::v1::{KeyValue, any_value::Value},
    resource::v1::Resource,
};
use prost::Message as _;

use super::memory::{Memory, u64_at};

/// The header: `signature` (8 bytes), `version` (u32), `payload_size`
/// (u32), `published_at_ns` (u64), `payload` (a pointer).
const HEADER_LEN: usize = 32;
const SIGNATURE: &[u8; 8] = b"OTEL_CTX";
/// Version 2 is the specification's; 1 was its development version.
const VERSIONS: [u32; 2] = [1, 2];
/// A payload larger than this is not read (the specification expects a
/// page or so).
const MAX_PAYLOAD: u32 = 64 * 1024;
/// Reads tried while the context is being updated.
const TRIES: usize = 3;

/// The payload (`opentelemetry/proto/common/v1/process_context.proto`).
#[derive(Clone, PartialEq, prost::Message)]
struct ProcessContext {
    #[prost(message, optional, tag = "1")]
    resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    extra_attributes: Vec<KeyValue>,
}

/// The extra attribute that names OTEP 4947's record attributes by index.
const KEY_MAP: &str = "threadlocal.attribute_key_map";

/// What a process published.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Published {
    /// The resource's attributes, as (key, value) in the order published;
    /// a value that is not a string is written as text (`true`, `42`,
    /// `0.5`), a list or a map left out.
    pub resource: Vec<(String, String)>,
    /// The names of the thread context records' attribute keys, by index
    /// (`threadlocal.attribute_key_map`; empty when not published).
    pub key_map: Vec<String>,
}

/// Why a process context could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CtxError {
    #[error("reading the process's memory")]
    Memory(#[source] std::io::Error),
    #[error("no OTEL_CTX signature")]
    Signature,
    #[error("version {0} is not one this build reads")]
    Version(u32),
    #[error("a payload of {0} bytes is past the limit")]
    TooLarge(u32),
    #[error("the context kept changing while read")]
    Changing,
    #[error("decoding the resource")]
    Decode(#[source] prost::DecodeError),
}

/// The address of the process context's mapping in the text of a maps
/// file, when one is there.
#[must_use]
pub fn find(maps: &str) -> Option<u64> {
    maps.lines().find_map(|line| {
        let path = line.splitn(6, ' ').nth(5)?.trim_start();
        let named = [
            "[anon_shmem:OTEL_CTX]",
            "/memfd:OTEL_CTX",
            "[anon:OTEL_CTX]",
        ]
        .iter()
        .any(|name| path.starts_with(name));
        if !named {
            return None;
        }
        let (start, _) = line.split_once('-')?;
        u64::from_str_radix(start, 16).ok()
    })
}

/// What the context published at `at` in `memory`'s process holds.
///
/// # Errors
/// When the header or payload cannot be read or is not valid, or the
/// context kept changing while read.
pub fn read(memory: Memory, at: u64) -> Result<Published, CtxError> {
    for _ in 0..TRIES {
        let header = header(memory, at)?;
        let published_at = u64_at(&header, 16).unwrap_or(0);
        if published_at == 0 {
            // Being updated.
            continue;
        }
        let size = u32_at(&header, 12);
        if size > MAX_PAYLOAD {
            return Err(CtxError::TooLarge(size));
        }
        let mut payload = vec![0; size as usize];
        memory
            .read(u64_at(&header, 24).unwrap_or(0), &mut payload)
            .map_err(CtxError::Memory)?;
        if u64_at(&self::header(memory, at)?, 16) != Some(published_at) {
            continue;
        }
        return decode(&payload);
    }
    Err(CtxError::Changing)
}

/// The payload: a `ProcessContext`, or (the specification's development
/// version, which early SDKs published) a bare `Resource`, whose
/// attributes do not decode as a `ProcessContext`'s resource.
fn decode(payload: &[u8]) -> Result<Published, CtxError> {
    if let Ok(ProcessContext {
        resource: Some(resource),
        extra_attributes,
    }) = ProcessContext::decode(payload)
    {
        return Ok(Published {
            resource: attributes(resource.attributes),
            key_map: key_map(extra_attributes),
        });
    }
    let resource = Resource::decode(payload).map_err(CtxError::Decode)?;
    Ok(Published {
        resource: attributes(resource.attributes),
        key_map: Vec::new(),
    })
}

/// The attribute key map among `extra`: its array's strings, by index.
fn key_map(extra: Vec<KeyValue>) -> Vec<String> {
    let Some(Value::ArrayValue(array)) = extra
        .into_iter()
        .find(|kv| kv.key == KEY_MAP)
        .and_then(|kv| kv.value?.value)
    else {
        return Vec::new();
    };
    array
        .values
        .into_iter()
        .map(|v| match v.value {
            Some(Value::StringValue(s)) => s,
            _ => String::new(),
        })
        .collect()
}

/// The header at `at`, its signature and version checked.
fn header(memory: Memory, at: u64) -> Result<[u8; HEADER_LEN], CtxError> {
    let mut header = [0; HEADER_LEN];
    memory.read(at, &mut header).map_err(CtxError::Memory)?;
    if &header[..8] != SIGNATURE {
        return Err(CtxError::Signature);
    }
    let version = u32_at(&header, 8);
    if !VERSIONS.contains(&version) {
        return Err(CtxError::Version(version));
    }
    Ok(header)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    bytes
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

fn attributes(attributes: Vec<KeyValue>) -> Vec<(String, String)> {
    attributes
        .into_iter()
        .filter_map(|kv| {
            let value = match kv.value?.value? {
                Value::StringValue(s) => s,
                Value::BoolValue(b) => b.to_string(),
                Value::IntValue(i) => i.to_string(),
                Value::DoubleValue(d) => d.to_string(),
                _ => return None,
            };
            Some((kv.key, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue};

    use super::*;

    fn me() -> Memory {
        Memory {
            pid: std::process::id(),
        }
    }

    fn kv(key: &str, value: Value) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue { value: Some(value) }),
            ..KeyValue::default()
        }
    }

    fn resource() -> Resource {
        Resource {
            attributes: vec![
                kv("service.name", Value::StringValue("checkout".to_owned())),
                kv("process.runtime.pid", Value::IntValue(42)),
            ],
            ..Resource::default()
        }
    }

    fn payload() -> Vec<u8> {
        let names = ["http_route", "http_method"].map(|n| AnyValue {
            value: Some(Value::StringValue(n.to_owned())),
        });
        ProcessContext {
            resource: Some(resource()),
            extra_attributes: vec![
                kv(
                    "threadlocal.schema_version",
                    Value::StringValue("tlsdesc_v1_dev".to_owned()),
                ),
                kv(
                    KEY_MAP,
                    Value::ArrayValue(ArrayValue {
                        values: names.to_vec(),
                    }),
                ),
            ],
        }
        .encode_to_vec()
    }

    fn published() -> Vec<(String, String)> {
        vec![
            ("service.name".to_owned(), "checkout".to_owned()),
            ("process.runtime.pid".to_owned(), "42".to_owned()),
        ]
    }

    fn header_for(payload: &[u8], version: u32, published_at: u64) -> Vec<u8> {
        let mut header = Vec::with_capacity(HEADER_LEN);
        header.extend_from_slice(SIGNATURE);
        header.extend_from_slice(&version.to_le_bytes());
        header.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_le_bytes());
        header.extend_from_slice(&published_at.to_le_bytes());
        header.extend_from_slice(&(payload.as_ptr() as u64).to_le_bytes());
        header
    }

    #[test]
    fn the_mapping_is_found_by_any_of_its_names() {
        let maps = "\
55d0c0a00000-55d0c0a21000 r-xp 00000000 08:01 1234 /usr/bin/app
7f10c0000000-7f10c0001000 rw-s 00000000 00:01 77 /memfd:OTEL_CTX (deleted)
";
        assert_eq!(find(maps), Some(0x7f10_c000_0000));
        assert_eq!(
            find("7f2000000000-7f2000001000 rw-p 00000000 00:00 0 [anon:OTEL_CTX]"),
            Some(0x7f20_0000_0000)
        );
        assert_eq!(
            find("7f2000000000-7f2000001000 rw-p 00000000 00:00 0 [anon:other]"),
            None
        );
    }

    #[test]
    fn a_published_context_reads_its_attributes() {
        let payload = payload();
        let header = header_for(&payload, 2, 1_700_000_000_000_000_000);
        let read = read(me(), header.as_ptr() as u64).unwrap();
        assert_eq!(read.resource, published());
        assert_eq!(read.key_map, ["http_route", "http_method"]);
    }

    #[test]
    fn a_bare_resource_is_read_as_the_development_version_published_it() {
        let payload = resource().encode_to_vec();
        let header = header_for(&payload, 2, 1);
        let read = read(me(), header.as_ptr() as u64).unwrap();
        assert_eq!(read.resource, published());
        assert!(read.key_map.is_empty());
    }

    #[test]
    fn an_unsigned_unknown_or_updating_context_is_not_read() {
        let payload = payload();
        let mut header = header_for(&payload, 2, 1);
        header[0] = b'X';
        assert!(matches!(
            read(me(), header.as_ptr() as u64),
            Err(CtxError::Signature)
        ));
        let header = header_for(&payload, 3, 1);
        assert!(matches!(
            read(me(), header.as_ptr() as u64),
            Err(CtxError::Version(3))
        ));
        let header = header_for(&payload, 2, 0);
        assert!(matches!(
            read(me(), header.as_ptr() as u64),
            Err(CtxError::Changing)
        ));
        let mut header = header_for(&payload, 2, 1);
        header[12..16].copy_from_slice(&(MAX_PAYLOAD + 1).to_le_bytes());
        assert!(matches!(
            read(me(), header.as_ptr() as u64),
            Err(CtxError::TooLarge(_))
        ));
    }
}

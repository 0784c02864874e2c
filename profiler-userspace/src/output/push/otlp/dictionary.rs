//! The tables an OTLP request's profiles share (strings, functions,
//! mappings, locations, stacks, attributes, links), each interned once,
//! and a row as a sample over them.
use std::{collections::HashMap, sync::Arc};

use opentelemetry_proto::tonic::{
    common::v1::{AnyValue, any_value},
    profiles::v1development as otlp,
};

use crate::{
    profile::{Line, Location, Mapping, Sample},
    sample::LabelValue,
};

/// The request's shared tables, each with its zero value at index 0, and
/// indices of what they hold.
pub(super) struct Dictionary {
    pub(super) tables: otlp::ProfilesDictionary,
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
    pub(super) fn new() -> Self {
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

    pub(super) fn value_type(&mut self, ty: &str, unit: &str) -> otlp::ValueType {
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
                Attribute::Str(mapping.build_id.to_string()),
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
    pub(super) fn sample(&mut self, row: &Sample, value: u64) -> otlp::Sample {
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

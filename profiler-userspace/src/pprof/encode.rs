//! Builds the pprof message with insertion-ordered tables (strings,
//! functions, mappings, locations) over samples in a canonical order, so
//! the same profile always encodes to the same bytes.
use std::{collections::HashMap, sync::Arc, time::UNIX_EPOCH};

use profiler_common::off_cpu::COUNT_SCALE;
use prost::Message as _;

use super::proto;
use crate::profile::{Line, Location, Mapping, Profile, Sample};

/// Encodes `profile` as an (uncompressed) pprof protobuf.
#[must_use]
pub fn encode(profile: &Profile) -> Vec<u8> {
    build(profile).encode_to_vec()
}

/// Builds the pprof message for `profile`.
#[must_use]
pub fn build(profile: &Profile) -> proto::Profile {
    let mut tables = Tables::default();
    let mut out = proto::Profile {
        string_table: vec![String::new()],
        ..proto::Profile::default()
    };
    tables.strings.insert(String::new(), 0);

    out.sample_type = SAMPLE_TYPES
        .iter()
        .map(|(ty, unit)| tables.value_type(&mut out, ty, unit))
        .collect();
    out.period_type = Some(out.sample_type[1]);
    out.period = to_i64(profile.period_ns);
    out.default_sample_type = out.sample_type[4].r#type;
    out.time_nanos = profile
        .start
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    out.duration_nanos = to_i64(profile.duration_ns);

    let keys = Labels {
        pid: tables.string(&mut out, "pid"),
        tid: tables.string(&mut out, "tid"),
        comm: tables.string(&mut out, "comm"),
        thread: tables.string(&mut out, "thread"),
        state: tables.string(&mut out, "state"),
    };

    let mut samples: Vec<_> = profile.samples.iter().collect();
    samples.sort();
    for sample in samples {
        let location_id = sample
            .stack
            .iter()
            .map(|location| tables.location(&mut out, location))
            .collect();
        let label = vec![
            num_label(keys.pid, sample.pid),
            num_label(keys.tid, sample.tid),
            str_label(keys.comm, tables.string(&mut out, &sample.comm)),
            str_label(keys.thread, tables.string(&mut out, &sample.thread)),
            str_label(keys.state, tables.string(&mut out, sample.state.label())),
        ];
        out.sample.push(proto::Sample {
            location_id,
            value: values(sample, profile.period_ns),
            label,
        });
    }
    for comment in &profile.comments {
        let index = tables.string(&mut out, comment);
        out.comment.push(index);
    }
    out
}

/// (type, unit) of each sample value, in order; `wall` is the default.
pub const SAMPLE_TYPES: [(&str, &str); 5] = [
    ("samples", "count"),
    ("cpu", "nanoseconds"),
    ("off_cpu_events", "count"),
    ("off_cpu", "nanoseconds"),
    ("wall", "nanoseconds"),
];

/// The values of one sample in [`SAMPLE_TYPES`] order. Off-CPU event
/// counts are fixed point in the kernel; pprof values are integers, so they
/// are rounded to the nearest event here.
fn values(sample: &Sample, period_ns: u64) -> Vec<i64> {
    let cpu_ns = sample.samples.saturating_mul(period_ns);
    let events = (sample.off_cpu_count + COUNT_SCALE / 2) / COUNT_SCALE;
    vec![
        to_i64(sample.samples),
        to_i64(cpu_ns),
        to_i64(events),
        to_i64(sample.off_cpu_ns),
        to_i64(cpu_ns.saturating_add(sample.off_cpu_ns)),
    ]
}

struct Labels {
    pid: i64,
    tid: i64,
    comm: i64,
    thread: i64,
    state: i64,
}

fn num_label(key: i64, num: u32) -> proto::Label {
    proto::Label {
        key,
        num: i64::from(num),
        ..proto::Label::default()
    }
}

fn str_label(key: i64, str: i64) -> proto::Label {
    proto::Label {
        key,
        str,
        ..proto::Label::default()
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Interning tables; ids are assigned in first-use order, starting at 1.
#[derive(Default)]
struct Tables {
    strings: HashMap<String, i64>,
    functions: HashMap<(String, String), u64>,
    mappings: HashMap<Arc<Mapping>, u64>,
    locations: HashMap<(u64, u64, Arc<[Line]>), u64>,
}

impl Tables {
    fn string(&mut self, out: &mut proto::Profile, s: &str) -> i64 {
        if let Some(&index) = self.strings.get(s) {
            return index;
        }
        let index = to_i64(out.string_table.len() as u64);
        out.string_table.push(s.to_owned());
        self.strings.insert(s.to_owned(), index);
        index
    }

    fn value_type(&mut self, out: &mut proto::Profile, ty: &str, unit: &str) -> proto::ValueType {
        proto::ValueType {
            r#type: self.string(out, ty),
            unit: self.string(out, unit),
        }
    }

    fn function(&mut self, out: &mut proto::Profile, line: &Line) -> u64 {
        let key = (line.function.clone(), line.file.clone());
        if let Some(&id) = self.functions.get(&key) {
            return id;
        }
        let id = out.function.len() as u64 + 1;
        let name = self.string(out, &line.function);
        let filename = self.string(out, &line.file);
        out.function.push(proto::Function {
            id,
            name,
            system_name: name,
            filename,
            start_line: 0,
        });
        self.functions.insert(key, id);
        id
    }

    fn mapping(&mut self, out: &mut proto::Profile, mapping: &Arc<Mapping>) -> u64 {
        if let Some(&id) = self.mappings.get(mapping) {
            return id;
        }
        let id = out.mapping.len() as u64 + 1;
        let filename = self.string(out, &mapping.file);
        let build_id = self.string(out, &mapping.build_id);
        out.mapping.push(proto::Mapping {
            id,
            memory_start: mapping.start,
            memory_limit: mapping.limit,
            file_offset: mapping.file_offset,
            filename,
            build_id,
            // Symbols are resolved here, so readers must not try again.
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
        });
        self.mappings.insert(mapping.clone(), id);
        id
    }

    fn location(&mut self, out: &mut proto::Profile, location: &Location) -> u64 {
        let mapping_id = location
            .mapping
            .as_ref()
            .map_or(0, |m| self.mapping(out, m));
        let key = (mapping_id, location.address, location.lines.clone());
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let line = location
            .lines
            .iter()
            .map(|line| proto::Line {
                function_id: self.function(out, line),
                line: i64::from(line.line),
                column: 0,
            })
            .collect();
        let id = out.location.len() as u64 + 1;
        out.location.push(proto::Location {
            id,
            mapping_id,
            address: location.address,
            line,
            is_folded: false,
        });
        self.locations.insert(key, id);
        id
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use profiler_common::sample::ThreadState;
    use prost::Message as _;

    use super::*;

    fn line(function: &str, file: &str, line: u32) -> Line {
        Line {
            function: function.into(),
            file: file.into(),
            line,
        }
    }

    fn fixture() -> Profile {
        let exe = Arc::new(Mapping {
            start: 0x1000,
            limit: 0x9000,
            file_offset: 0,
            file: "/usr/bin/app".into(),
            build_id: "abcd".into(),
        });
        let hot = Location {
            mapping: Some(exe.clone()),
            address: 0x1234,
            // `inner` inlined into `hot`.
            lines: Arc::from([line("inner", "app.rs", 7), line("hot", "app.rs", 20)]),
        };
        let main = Location {
            mapping: Some(exe.clone()),
            address: 0x2000,
            lines: Arc::from([line("main", "app.rs", 40)]),
        };
        let unresolved = Location {
            mapping: Some(exe),
            address: 0x3000,
            lines: Arc::from([]),
        };
        let sample = |tid, stack: Vec<Location>, samples| Sample {
            pid: 10,
            tid,
            comm: Arc::from("app"),
            thread: format!("worker-{tid}"),
            state: ThreadState::Running,
            stack,
            samples,
            off_cpu_ns: 0,
            off_cpu_count: 0,
        };
        Profile {
            start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            duration_ns: 10_000_000_000,
            period_ns: 10_101_010,
            samples: vec![
                sample(12, vec![unresolved, main.clone()], 1),
                sample(11, vec![hot.clone(), main.clone()], 30),
                sample(
                    11,
                    vec![Location::marker("[lost user stack: stack map full]".into())],
                    2,
                ),
                Sample {
                    state: ThreadState::Sleeping,
                    off_cpu_ns: 5_000_000,
                    // 2.6 debiased events.
                    off_cpu_count: 2_600,
                    ..sample(13, vec![main.clone()], 0)
                },
            ],
            comments: vec!["stack_map_full_drops=2".into()],
        }
    }

    fn decode(bytes: &[u8]) -> proto::Profile {
        proto::Profile::decode(bytes).expect("valid protobuf")
    }

    fn string(p: &proto::Profile, index: i64) -> &str {
        &p.string_table[usize::try_from(index).unwrap()]
    }

    #[test]
    fn round_trip_tables() {
        let p = decode(&encode(&fixture()));
        assert_eq!(p.string_table[0], "", "string_table[0] must be empty");
        let types: Vec<_> = p
            .sample_type
            .iter()
            .map(|t| (string(&p, t.r#type), string(&p, t.unit)))
            .collect();
        assert_eq!(types, SAMPLE_TYPES);
        assert_eq!(string(&p, p.default_sample_type), "wall");
        let period_type = p.period_type.unwrap();
        assert_eq!(
            (string(&p, period_type.r#type), string(&p, period_type.unit)),
            ("cpu", "nanoseconds")
        );
        assert_eq!(p.period, 10_101_010);
        assert_eq!(p.time_nanos, 1_700_000_000_000_000_000);
        assert_eq!(p.duration_nanos, 10_000_000_000);
        assert_eq!(string(&p, p.comment[0]), "stack_map_full_drops=2");

        assert_eq!(p.mapping.len(), 1);
        assert_eq!(string(&p, p.mapping[0].filename), "/usr/bin/app");
        assert_eq!(string(&p, p.mapping[0].build_id), "abcd");
        // hot, main, unresolved, marker: main is shared between samples.
        assert_eq!(p.location.len(), 4);
        assert_eq!(p.sample.len(), 4);
        let sleeping = &p.sample[3];
        assert_eq!(
            sleeping.value,
            vec![0, 0, 3, 5_000_000, 5_000_000],
            "events rounded"
        );
        assert_eq!(string(&p, sleeping.label[4].str), "sleeping");

        let names = |loc_id: u64| -> Vec<&str> {
            let loc = &p.location[usize::try_from(loc_id - 1).unwrap()];
            assert_eq!(loc.id, loc_id);
            loc.line
                .iter()
                .map(|l| {
                    string(
                        &p,
                        p.function[usize::try_from(l.function_id - 1).unwrap()].name,
                    )
                })
                .collect()
        };
        // Samples come out sorted by tid, then stack; tid 11's marker (no
        // mapping) sorts before its real stack.
        assert_eq!(
            names(p.sample[0].location_id[0]),
            ["[lost user stack: stack map full]"]
        );
        let first = &p.sample[1];
        assert_eq!(
            first.value,
            vec![30, 30 * 10_101_010, 0, 0, 30 * 10_101_010]
        );
        assert_eq!(
            names(first.location_id[0]),
            ["inner", "hot"],
            "inlined: callee first"
        );
        assert_eq!(names(first.location_id[1]), ["main"]);
        let labels: Vec<_> = first
            .label
            .iter()
            .map(|l| (string(&p, l.key), string(&p, l.str).to_owned(), l.num))
            .collect();
        assert_eq!(
            labels,
            [
                ("pid", String::new(), 10),
                ("tid", String::new(), 11),
                ("comm", "app".into(), 0),
                ("thread", "worker-11".into(), 0),
                ("state", "running".into(), 0),
            ]
        );
        let unresolved = &p.sample[2];
        let loc = &p.location[usize::try_from(unresolved.location_id[0] - 1).unwrap()];
        assert_eq!(loc.address, 0x3000);
        assert!(
            loc.line.is_empty(),
            "unresolved address keeps its address, no lines"
        );
        assert_eq!(loc.mapping_id, 1);
    }

    #[test]
    fn deterministic_bytes_whatever_the_input_order() {
        let profile = fixture();
        let mut reversed = profile.clone();
        reversed.samples.reverse();
        let bytes = encode(&profile);
        assert_eq!(bytes, encode(&profile));
        assert_eq!(bytes, encode(&reversed));
    }

    #[test]
    fn every_string_is_interned_once() {
        let p = decode(&encode(&fixture()));
        let mut seen = std::collections::HashSet::new();
        for s in &p.string_table {
            assert!(seen.insert(s), "{s:?} appears twice");
        }
    }
}

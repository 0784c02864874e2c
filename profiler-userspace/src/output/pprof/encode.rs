//! Builds the pprof message with insertion-ordered tables (strings,
//! functions, mappings, locations) over samples in a canonical order, so
//! the same profile always encodes to the same bytes.
use std::{sync::Arc, time::UNIX_EPOCH};

use profiler_common::off_cpu::COUNT_SCALE;
use prost::Message as _;
use rustc_hash::FxHashMap as HashMap;

use super::proto;
use crate::{
    profile::{Line, Location, Mapping, Profile, Sample, View},
    sample::LabelValue,
};

/// Encodes `profile` as an (uncompressed) pprof protobuf, with every
/// sample type.
#[must_use]
pub fn encode(profile: &Profile) -> Vec<u8> {
    build(profile).encode_to_vec()
}

/// Encodes only the sample types of `profile.view` (`samples` and `cpu`;
/// `off_cpu_events` and `off_cpu`, with `off_cpu_wakers` and
/// `critical_path` where it has their rows; or `wall`, with
/// `goroutine_wakers`) and only the rows the view shows with weight in
/// them: one profile type for backends that file each pprof under one
/// name.
#[must_use]
pub fn encode_view(profile: &Profile) -> Vec<u8> {
    let mut types = match profile.view {
        View::Cpu => vec![0, 1],
        View::OffCpu => vec![2, 3],
        View::Wall => vec![4],
    };
    match profile.view {
        View::OffCpu => types.extend(present(profile, &[WAKERS, CRITICAL_PATH])),
        View::Wall => types.extend(present(profile, &[GOROUTINE_WAKERS])),
        View::Cpu => {}
    }
    build_with(profile, &types, false).encode_to_vec()
}

/// Builds the pprof message for `profile`, with every sample type
/// (`off_cpu_wakers`, `critical_path` and `goroutine_wakers` only where
/// it has their rows: `--wakers`, `--goroutine-wakers`).
#[must_use]
pub fn build(profile: &Profile) -> proto::Profile {
    let mut types = vec![0, 1, 2, 3, 4, 5];
    types.extend(present(profile, &[WAKERS, CRITICAL_PATH, GOROUTINE_WAKERS]));
    build_with(profile, &types, true)
}

/// Those of the sample types `types` that some row of `profile` has
/// weight in.
fn present(profile: &Profile, types: &[usize]) -> Vec<usize> {
    types
        .iter()
        .copied()
        .filter(|&ty| {
            profile.samples.iter().any(|s| match ty {
                WAKERS => s.waker_ns != 0,
                CRITICAL_PATH => s.critical_ns != 0,
                _ => s.goroutine_waker_ns != 0,
            })
        })
        .collect()
}

/// Builds the pprof message for the rows of `profile` that its view
/// shows (`all` of them), with the sample types at `types` (indices into
/// [`SAMPLE_TYPES`]; the view's default among them). The period type is
/// `cpu` where present, else the last type.
fn build_with(profile: &Profile, types: &[usize], all: bool) -> proto::Profile {
    let mut tables = Tables::default();
    let mut out = proto::Profile {
        string_table: vec![String::new()],
        ..proto::Profile::default()
    };
    tables.strings.insert(String::new(), 0);

    out.sample_type = types
        .iter()
        .map(|&i| tables.value_type(&mut out, SAMPLE_TYPES[i].0, SAMPLE_TYPES[i].1))
        .collect();
    let position = |ty: usize| types.iter().position(|&t| t == ty);
    let period = position(1).unwrap_or(types.len() - 1);
    out.period_type = Some(out.sample_type[period]);
    out.period = if types[period] == 1 {
        to_i64(profile.period_ns)
    } else {
        0
    };
    let default = position(default_sample_type(profile.view)).unwrap_or(types.len() - 1);
    out.default_sample_type = out.sample_type[default].r#type;
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
        cgroup: tables.string(&mut out, "cgroup"),
        container_id: tables.string(&mut out, "container_id"),
        container_runtime: tables.string(&mut out, "container_runtime"),
        pod_uid: tables.string(&mut out, "pod_uid"),
        service: tables.string(&mut out, "service"),
    };

    let view = profile.view;
    let mut samples: Vec<_> = profile
        .samples
        .iter()
        .filter(|s| all || s.in_view(view))
        .collect();
    samples.sort();
    for sample in samples {
        let all = values(sample, profile.period_ns);
        if types.iter().all(|&i| all[i] == 0) {
            continue;
        }
        let location_id = sample
            .stack
            .iter()
            .map(|location| tables.location(&mut out, location))
            .collect();
        let label = labels(&keys, sample, &mut tables, &mut out);
        out.sample.push(proto::Sample {
            location_id,
            value: types.iter().map(|&i| all[i]).collect(),
            label,
        });
    }
    mark_unsymbolized_mappings(&mut out);
    for comment in &profile.comments {
        let index = tables.string(&mut out, comment);
        out.comment.push(index);
    }
    out
}

/// Clears the `has_*` flags of every mapping with a location that did not
/// resolve, so readers with the binary (`go tool pprof` with
/// `PPROF_BINARY_PATH`, by build id) symbolize those locations themselves.
fn mark_unsymbolized_mappings(out: &mut proto::Profile) {
    let unresolved: std::collections::HashSet<u64> = out
        .location
        .iter()
        .filter(|l| l.line.is_empty() && l.mapping_id != 0)
        .map(|l| l.mapping_id)
        .collect();
    for mapping in &mut out.mapping {
        if unresolved.contains(&mapping.id) {
            mapping.has_functions = false;
            mapping.has_filenames = false;
            mapping.has_line_numbers = false;
            mapping.has_inline_frames = false;
        }
    }
}

/// Index in [`SAMPLE_TYPES`] of the type readers show first.
fn default_sample_type(view: View) -> usize {
    match view {
        View::Cpu => 1,
        View::OffCpu => 3,
        View::Wall => 4,
    }
}

/// (type, unit) of each sample value, in order.
pub const SAMPLE_TYPES: [(&str, &str); 9] = [
    ("samples", "count"),
    ("cpu", "nanoseconds"),
    ("off_cpu_events", "count"),
    ("off_cpu", "nanoseconds"),
    ("wall", "nanoseconds"),
    ("goroutine", "nanoseconds"),
    ("off_cpu_wakers", "nanoseconds"),
    ("critical_path", "nanoseconds"),
    ("goroutine_wakers", "nanoseconds"),
];

/// Index of `off_cpu_wakers` in [`SAMPLE_TYPES`].
const WAKERS: usize = 6;
/// Index of `critical_path` in [`SAMPLE_TYPES`].
const CRITICAL_PATH: usize = 7;
/// Index of `goroutine_wakers` in [`SAMPLE_TYPES`].
const GOROUTINE_WAKERS: usize = 8;

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
        to_i64(sample.wall_ns(period_ns)),
        to_i64(sample.runtime_ns),
        to_i64(sample.waker_ns),
        to_i64(sample.critical_ns),
        to_i64(sample.goroutine_waker_ns),
    ]
}

/// The labels of `sample`: its process, then its thread (tid, name,
/// state) unless a runtime's labels stand for it (a goroutine's id,
/// status, wait reason), then the runtime's labels, then where it runs.
fn labels(
    keys: &Labels,
    sample: &Sample,
    tables: &mut Tables,
    out: &mut proto::Profile,
) -> Vec<proto::Label> {
    let mut label = vec![num_label(keys.pid, sample.pid)];
    let runtime = sample.labels.as_deref();
    if runtime.is_some_and(|r| r.replaces_thread) {
        label.push(str_label(keys.comm, tables.string(out, &sample.comm)));
    } else {
        label.extend([
            num_label(keys.tid, sample.tid),
            str_label(keys.comm, tables.string(out, &sample.comm)),
            str_label(keys.thread, tables.string(out, &sample.thread)),
            str_label(keys.state, tables.string(out, sample.state.label())),
        ]);
    }
    for runtime_label in runtime.iter().flat_map(|r| &r.labels) {
        let key = tables.string(out, &runtime_label.key);
        label.push(match &runtime_label.value {
            LabelValue::Num(num) => proto::Label {
                key,
                num: *num,
                ..proto::Label::default()
            },
            LabelValue::Str(value) => str_label(key, tables.string(out, value)),
            LabelValue::Static(value) => str_label(key, tables.string(out, value)),
        });
    }
    let placement = &sample.placement;
    for (key, value) in [
        (keys.cgroup, &placement.cgroup),
        (keys.container_id, &placement.container_id),
        (keys.container_runtime, &placement.container_runtime),
        (keys.pod_uid, &placement.pod_uid),
        (keys.service, &placement.service),
    ] {
        if !value.is_empty() {
            label.push(str_label(key, tables.string(out, value)));
        }
    }
    label
}

struct Labels {
    pid: i64,
    tid: i64,
    comm: i64,
    thread: i64,
    state: i64,
    cgroup: i64,
    container_id: i64,
    container_runtime: i64,
    pod_uid: i64,
    service: i64,
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
            // Resolved here, so readers must not try again; cleared by
            // `mark_unsymbolized_mappings` where a location did not resolve.
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
mod tests;

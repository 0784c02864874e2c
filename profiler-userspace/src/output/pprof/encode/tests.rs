use std::time::{Duration, SystemTime};

use profiler_common::sample::ThreadState;
use prost::Message as _;

use super::*;
use crate::runtimes::go::{GoroutineKey, g::GoroutineStatus, goroutine_labels};

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
        digest: None,
        file_id: None,
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
        placement: Arc::default(),
        state: ThreadState::Running,
        stack,
        samples,
        off_cpu_ns: 0,
        off_cpu_count: 0,
        labels: None,
        runtime_ns: 0,
        waker_ns: 0,
        critical_ns: 0,
        goroutine_waker_ns: 0,
        off_cpu_in_wall: true,
    };
    Profile {
        view: View::Wall,
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
    assert_eq!(types, SAMPLE_TYPES[..6], "off_cpu_wakers only with wakers");
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
        vec![0, 0, 3, 5_000_000, 5_000_000, 0],
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
        vec![30, 30 * 10_101_010, 0, 0, 30 * 10_101_010, 0]
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
fn each_view_names_its_own_default_sample_type() {
    for (view, name) in [
        (View::Cpu, "cpu"),
        (View::OffCpu, "off_cpu"),
        (View::Wall, "wall"),
    ] {
        let p = decode(&encode(&Profile { view, ..fixture() }));
        assert_eq!(string(&p, p.default_sample_type), name, "{view:?}");
    }
}

#[test]
fn placement_labels_only_where_known() {
    let mut profile = fixture();
    profile.samples[0].placement = Arc::new(crate::process::cgroup::Placement {
        cgroup: "/system.slice/nginx.service".into(),
        container_id: String::new(),
        container_runtime: String::new(),
        pod_uid: String::new(),
        service: "nginx.service".into(),
    });
    let p = decode(&encode(&profile));
    let labels = |s: &proto::Sample| -> Vec<(String, String)> {
        s.label
            .iter()
            .filter(|l| l.str != 0)
            .map(|l| (string(&p, l.key).to_owned(), string(&p, l.str).to_owned()))
            .collect()
    };
    let with: Vec<_> = p
        .sample
        .iter()
        .filter(|s| labels(s).iter().any(|(k, _)| k == "service"))
        .collect();
    assert_eq!(with.len(), 1);
    assert!(labels(with[0]).contains(&("cgroup".into(), "/system.slice/nginx.service".into())));
    assert!(
        p.sample
            .iter()
            .flat_map(labels)
            .all(|(k, _)| k != "container_id"),
        "no empty container_id labels"
    );
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

#[test]
fn goroutine_rows_carry_their_goroutine_and_replace_their_threads_off_cpu_in_wall() {
    let mut profile = fixture();
    let thread = profile.samples[3].clone();
    profile.samples = vec![
        // A thread of a Go process whose goroutines were read: its
        // off-CPU time stays in `off_cpu`, not in `wall`.
        Sample {
            waker_ns: 0,
            critical_ns: 0,
            goroutine_waker_ns: 0,
            off_cpu_in_wall: false,
            ..thread.clone()
        },
        Sample {
            tid: 0,
            thread: String::new(),
            off_cpu_ns: 0,
            off_cpu_count: 0,
            labels: Some(Arc::new(goroutine_labels(&GoroutineKey {
                goid: 42,
                status: GoroutineStatus::Waiting,
                wait_reason: Some(Arc::from("chan receive")),
                created_by: Arc::from("main.serve"),
                labels: Arc::from([program_label("endpoint", "/heavy")]),
                woken_by: None,
            }))),
            runtime_ns: 7_000_000,
            ..thread
        },
    ];
    let p = decode(&encode(&profile));
    // Rows sort by pid, then tid: the goroutine's (tid 0) first.
    assert_eq!(p.sample[0].value, vec![0, 0, 0, 0, 7_000_000, 7_000_000]);
    assert_eq!(p.sample[1].value, vec![0, 0, 3, 5_000_000, 0, 0]);
    let labels: Vec<(&str, String)> = p.sample[0]
        .label
        .iter()
        .map(|l| {
            let value = if l.str == 0 {
                l.num.to_string()
            } else {
                string(&p, l.str).to_owned()
            };
            (string(&p, l.key), value)
        })
        .collect();
    let want = [
        ("pid", "10"),
        ("comm", "app"),
        ("goroutine", "42"),
        ("state", "waiting"),
        ("wait_reason", "chan receive"),
        ("created_by", "main.serve"),
        ("endpoint", "/heavy"),
    ];
    assert_eq!(
        labels,
        want.map(|(k, v)| (k, v.to_owned())),
        "no tid or thread: a goroutine is no thread's"
    );
    // A view without the goroutine rows' weight leaves them out.
    let cpu_only = decode(&encode_view(&Profile {
        view: View::OffCpu,
        ..profile
    }));
    assert_eq!(cpu_only.sample.len(), 1);
}

/// A label of the program's own (a Go pprof label).
fn program_label(key: &str, value: &str) -> crate::sample::Label {
    crate::sample::Label {
        key: key.to_owned().into(),
        attribute: key.to_owned().into(),
        value: LabelValue::Str(Arc::from(value)),
    }
}

/// With `--wakers`' rows, `off_cpu_wakers` and `critical_path` are types
/// of the whole profile and of the off-CPU view (a push's `offcpu`), each
/// holding only its rows' weight; without them, neither has them.
#[test]
fn waker_rows_bring_their_own_sample_type() {
    let mut profile = fixture();
    let blocked = profile.samples[3].clone();
    let mut stack = vec![Location::marker("[woken by producer:12]".into())];
    stack.extend(blocked.stack.iter().cloned());
    profile.samples.push(Sample {
        stack: stack.clone(),
        off_cpu_ns: 0,
        off_cpu_count: 0,
        waker_ns: blocked.off_cpu_ns,
        ..blocked.clone()
    });
    stack.insert(0, Location::marker("[not profiled]".into()));
    profile.samples.push(Sample {
        stack,
        off_cpu_ns: 0,
        off_cpu_count: 0,
        critical_ns: blocked.off_cpu_ns,
        ..blocked
    });
    let types = |p: &proto::Profile| -> Vec<String> {
        p.sample_type
            .iter()
            .map(|t| string(p, t.r#type).to_owned())
            .collect()
    };
    let whole = decode(&encode(&profile));
    assert_eq!(types(&whole)[6..], ["off_cpu_wakers", "critical_path"]);
    let wakers: i64 = whole.sample.iter().map(|s| s.value[6]).sum();
    let wall: i64 = whole.sample.iter().map(|s| s.value[4]).sum();
    assert_eq!(wakers, 5_000_000);
    assert_eq!(
        wall,
        5_000_000 + 33 * 10_101_010,
        "waker rows count in no other type"
    );
    let off_cpu = decode(&encode_view(&Profile {
        view: View::OffCpu,
        ..profile
    }));
    assert_eq!(
        types(&off_cpu),
        [
            "off_cpu_events",
            "off_cpu",
            "off_cpu_wakers",
            "critical_path"
        ]
    );
    assert_eq!(off_cpu.sample.len(), 3);
    let plain = decode(&encode_view(&Profile {
        view: View::OffCpu,
        ..fixture()
    }));
    assert_eq!(types(&plain), ["off_cpu_events", "off_cpu"]);
}

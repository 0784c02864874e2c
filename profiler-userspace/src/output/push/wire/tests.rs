//! The bodies as the backends' own rules see them: decoded and checked by
//! the fake backend of the fixtures crate (Pyroscope's messages from
//! Grafana's own `pyroscope` crate, Parca's rules, OTLP's dictionary rules).
use std::{sync::Arc, time::UNIX_EPOCH};

use profiler_common::sample::ThreadState;
use profiler_fixtures::backend::{self, Protocol};

use super::*;
use crate::{
    output::push::series::{self, Series},
    process::cgroup::Placement,
    profile::{Line, Location, Mapping, Sample},
};

pub(super) fn row(
    comm: &str,
    service: &str,
    function: &str,
    samples: u64,
    off_cpu_ns: u64,
) -> Sample {
    let mapping = Arc::new(Mapping {
        start: 0x1000,
        limit: 0x9000,
        file_offset: 0,
        file: format!("/usr/bin/{comm}").into(),
        build_id: "abcd".into(),
        digest: None,
        file_id: None,
    });
    Sample {
        pid: 42,
        tid: 43,
        comm: Arc::from(comm),
        thread: format!("{comm}-worker"),
        placement: Arc::new(Placement {
            cgroup: format!("/system.slice/{service}"),
            container_id: String::new(),
            container_runtime: String::new(),
            pod_uid: String::new(),
            service: service.to_owned(),
        }),
        state: if off_cpu_ns > 0 {
            ThreadState::Sleeping
        } else {
            ThreadState::Running
        },
        stack: vec![Location {
            mapping: Some(mapping),
            address: 0x1234,
            lines: Arc::new([Line {
                function: function.to_owned(),
                file: "main.c".to_owned(),
                line: 7,
            }]),
        }],
        samples,
        off_cpu_ns,
        off_cpu_count: u64::from(off_cpu_ns > 0) * 1000,
        labels: None,
        runtime_ns: 0,
        waker_ns: 0,
        critical_ns: 0,
        goroutine_waker_ns: 0,
        off_cpu_in_wall: true,
    }
}

fn two_programs() -> Vec<Series> {
    let profile = Profile {
        view: View::Wall,
        start: UNIX_EPOCH,
        duration_ns: 15_000_000_000,
        period_ns: 10_101_010,
        samples: vec![
            row("nginx", "nginx.service", "serve", 3, 0),
            row("nginx", "nginx.service", "wait", 0, 2_000_000),
            row("cron", "cron.service", "tick", 1, 0),
        ],
        comments: vec!["on_cpu_samples=4".to_owned()],
    };
    series::split(profile, "host1")
}

/// The series of a window holding only `sample`.
pub(super) fn one_program(sample: Sample) -> Vec<Series> {
    let profile = Profile {
        view: View::Wall,
        start: UNIX_EPOCH,
        duration_ns: 15_000_000_000,
        period_ns: 10_101_010,
        samples: vec![sample],
        comments: Vec::new(),
    };
    series::split(profile, "host1")
}

#[test]
fn every_protocol_carries_each_programs_functions_and_totals() {
    let series = two_programs();
    for (protocol, ours) in [
        (Protocol::Pyroscope, PushProtocol::Pyroscope),
        (Protocol::Parca, PushProtocol::Parca),
        (Protocol::Otlp, PushProtocol::Otlp),
    ] {
        let mut received = Vec::new();
        for body in bodies(ours, &series, None) {
            received.extend(
                backend::decode(protocol, &body).unwrap_or_else(|e| panic!("{protocol:?}: {e}")),
            );
        }
        let total = |service: &str, ty: &str, function: &str| -> i64 {
            received
                .iter()
                .filter(|p| p.labels.get("service_name").map(String::as_str) == Some(service))
                .map(|p| p.total(ty, function))
                .sum()
        };
        assert_eq!(
            total("nginx.service", "cpu", "serve"),
            3 * 10_101_010,
            "{protocol:?}"
        );
        assert_eq!(
            total("nginx.service", "off_cpu", "wait"),
            2_000_000,
            "{protocol:?}"
        );
        assert_eq!(
            total("nginx.service", "wall", "wait") + total("nginx.service", "wall", "serve"),
            3 * 10_101_010 + 2_000_000,
            "{protocol:?}"
        );
        assert_eq!(
            total("cron.service", "cpu", "tick"),
            10_101_010,
            "{protocol:?}"
        );
        assert_eq!(total("cron.service", "off_cpu", "tick"), 0, "{protocol:?}");
        let hosts: Vec<_> = received
            .iter()
            .map(|p| p.labels["hostname"].as_str())
            .collect();
        assert!(
            hosts.iter().all(|&h| h == "host1"),
            "{protocol:?}: {hosts:?}"
        );
    }
}

#[test]
fn pyroscope_gets_one_named_type_per_view() {
    let mut names: Vec<_> = bodies(PushProtocol::Pyroscope, &two_programs(), None)
        .iter()
        .flat_map(|body| backend::decode(Protocol::Pyroscope, body).unwrap())
        .map(|p| {
            (
                p.labels["service_name"].clone(),
                p.labels["__name__"].clone(),
                p.types(),
            )
        })
        .collect();
    names.sort();
    let types = |t: &[&str]| t.iter().map(|&s| s.to_owned()).collect::<Vec<_>>();
    assert_eq!(
        names,
        [
            (
                "cron.service".to_owned(),
                "process_cpu".to_owned(),
                types(&["samples", "cpu"])
            ),
            (
                "cron.service".to_owned(),
                "wall".to_owned(),
                types(&["wall"])
            ),
            (
                "nginx.service".to_owned(),
                "offcpu".to_owned(),
                types(&["off_cpu_events", "off_cpu"])
            ),
            (
                "nginx.service".to_owned(),
                "process_cpu".to_owned(),
                types(&["samples", "cpu"])
            ),
            (
                "nginx.service".to_owned(),
                "wall".to_owned(),
                types(&["wall"])
            ),
        ]
    );
}

#[test]
fn many_programs_are_split_over_bounded_requests() {
    // Every function name distinct, so the pprofs do not compress away.
    let samples = (0..16_000)
        .map(|i| {
            let name = format!("{:064x}_{i}", u64::MAX - i);
            row(
                &format!("p{}", i % 40),
                &format!("s{}.service", i % 40),
                &name,
                1,
                1,
            )
        })
        .collect();
    let profile = Profile {
        view: View::Wall,
        start: UNIX_EPOCH,
        duration_ns: 1,
        period_ns: 1,
        samples,
        comments: Vec::new(),
    };
    let series = series::split(profile, "h");
    let requests = bodies(PushProtocol::Pyroscope, &series, None);
    assert!(requests.len() > 1, "{} request(s)", requests.len());
    let mut programs = std::collections::BTreeSet::new();
    for body in &requests {
        assert!(body.len() <= MAX_BODY + 64 * 1024, "{} bytes", body.len());
        for profile in backend::decode(Protocol::Pyroscope, body).unwrap() {
            programs.insert(profile.labels["service_name"].clone());
        }
    }
    assert_eq!(programs.len(), 40);
}

/// `programs` programs of `count` rows each, every row on the CPU in its
/// own function (named `function_len` bytes long) under one common caller,
/// `main`.
fn big_programs(programs: usize, count: usize, function_len: usize) -> Vec<Series> {
    let samples = (0..programs * count)
        .map(|i| {
            let program = i / count;
            let comm = format!("big{program}");
            let mut sample = row(&comm, &format!("{comm}.service"), "", 1, 0);
            let leaf = format!("f{i:07}").repeat(function_len / 8);
            let frames = ["main".to_owned(), leaf];
            sample.stack = frames
                .into_iter()
                .rev()
                .zip(1u64..)
                .map(|(function, n)| Location {
                    mapping: None,
                    address: n * 0x10 + (i as u64) * 0x100,
                    lines: Arc::new([Line {
                        function,
                        file: "big.c".to_owned(),
                        line: 1,
                    }]),
                })
                .collect();
            sample
        })
        .collect();
    let profile = Profile {
        view: View::Wall,
        start: UNIX_EPOCH,
        duration_ns: 15_000_000_000,
        period_ns: 10_101_010,
        samples,
        comments: Vec::new(),
    };
    series::split(profile, "host1")
}

#[test]
fn a_program_past_pyroscopes_profile_limits_goes_in_several_profiles() {
    // Past 16000 samples; past 4 MiB uncompressed (600 names of 8 KiB).
    for (rows, function_len) in [(40_000, 8), (600, 8 << 10)] {
        let series = big_programs(1, rows, function_len);
        let mut cpu = Vec::new();
        for body in bodies(PushProtocol::Pyroscope, &series, None) {
            let received = backend::decode(Protocol::Pyroscope, &body)
                .unwrap_or_else(|e| panic!("{rows} rows: {e}"));
            cpu.extend(
                received
                    .into_iter()
                    .filter(|p| p.labels["__name__"] == "process_cpu"),
            );
        }
        assert!(cpu.len() >= 2, "{rows} rows in {} profile(s)", cpu.len());
        let total: i64 = cpu.iter().map(|p| p.total("cpu", "main")).sum();
        let expected = i64::try_from(rows).unwrap() * 10_101_010;
        assert_eq!(total, expected, "{rows} rows: every row, once");
        let leaves: std::collections::BTreeSet<_> = cpu
            .iter()
            .flat_map(|p| &p.samples)
            .map(|s| &s.functions[0])
            .collect();
        assert_eq!(leaves.len(), rows, "{rows} rows: each leaf");
    }
}

#[test]
fn otlp_requests_stay_within_the_collectors_limit_and_pyroscopes_rows() {
    // 64 programs of 48 rows named 8 KiB each: 24 MiB in one request, past
    // the collector's limit; one program of 40000 rows: past the rows
    // Pyroscope's OTLP intake takes in one profile.
    for (programs, rows, function_len) in [(64, 48, 8 << 10), (1, 40_000, 8)] {
        let series = big_programs(programs, rows, function_len);
        let requests = bodies(PushProtocol::Otlp, &series, None);
        let mut cpu = Vec::new();
        for body in &requests {
            let received = backend::decode(Protocol::Otlp, body)
                .unwrap_or_else(|e| panic!("{programs}x{rows}: {e}"));
            cpu.extend(received.into_iter().filter(|p| p.types() == ["cpu"]));
        }
        let most = cpu.iter().map(|p| p.samples.len()).max().unwrap();
        assert!(
            most <= 16_000,
            "{programs}x{rows}: a profile of {most} rows"
        );
        let total: i64 = cpu.iter().map(|p| p.total("cpu", "main")).sum();
        let expected = i64::try_from(programs * rows).unwrap() * 10_101_010;
        assert_eq!(total, expected, "{programs}x{rows}: every row, once");
        let leaves: std::collections::BTreeSet<_> = cpu
            .iter()
            .flat_map(|p| &p.samples)
            .map(|s| &s.functions[0])
            .collect();
        assert_eq!(
            leaves.len(),
            programs * rows,
            "{programs}x{rows}: each leaf"
        );
        let services: std::collections::BTreeSet<_> =
            cpu.iter().map(|p| &p.labels["service_name"]).collect();
        assert_eq!(services.len(), programs);
    }
}

/// Python frames (no mapping, no address: a function, file and line)
/// reach every backend as frames of their own, above the native ones.
#[test]
fn every_protocol_carries_python_frames() {
    let python = |function: &str, line: u32| Location {
        mapping: None,
        address: 0,
        lines: Arc::new([Line {
            function: function.to_owned(),
            file: "app.py".to_owned(),
            line,
        }]),
    };
    let mut sample = row("python3.11", "app.service", "Py_RunMain", 5, 0);
    sample
        .stack
        .splice(0..0, [python("Worker.handle", 12), python("main", 40)]);
    let series = one_program(sample);
    for (protocol, ours) in [
        (Protocol::Pyroscope, PushProtocol::Pyroscope),
        (Protocol::Parca, PushProtocol::Parca),
        (Protocol::Otlp, PushProtocol::Otlp),
    ] {
        let received: Vec<_> = bodies(ours, &series, None)
            .iter()
            .flat_map(|body| {
                backend::decode(protocol, body).unwrap_or_else(|e| panic!("{protocol:?}: {e}"))
            })
            .collect();
        for function in ["Worker.handle", "main", "Py_RunMain"] {
            let total: i64 = received.iter().map(|p| p.total("cpu", function)).sum();
            assert_eq!(total, 5 * 10_101_010, "{protocol:?}: {function}");
        }
    }
}

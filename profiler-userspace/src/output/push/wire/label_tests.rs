//! Labels as the backends' own rules see them (the fake backends of the
//! fixtures crate, as in `tests.rs`): a container's, a Go program's own,
//! a sample's trace and span.
use std::sync::Arc;

use profiler_fixtures::backend::{self, Protocol};

use super::{
    super::PushProtocol,
    bodies,
    tests::{one_program, row},
};
use crate::process::cgroup::Placement;

/// A container's series carries its id, runtime and pod under each
/// backend's names: series labels for Pyroscope and Parca, resource
/// attributes (`container.id`, `container.runtime`, `k8s.pod.uid`) for
/// OTLP.
#[test]
fn every_protocol_carries_a_containers_id_runtime_and_pod() {
    let mut sample = row("api", "", "handle", 2, 0);
    sample.placement = Arc::new(Placement {
        cgroup: "/kubepods/besteffort/pod4d8a/3f4b".to_owned(),
        container_id: "3f4b0c7f9d2a".to_owned(),
        container_runtime: "cri".to_owned(),
        pod_uid: "4d8a1c2e".to_owned(),
        service: String::new(),
    });
    let series = one_program(sample);
    for (protocol, ours, [runtime, pod]) in [
        (
            Protocol::Pyroscope,
            PushProtocol::Pyroscope,
            ["container_runtime", "pod_uid"],
        ),
        (
            Protocol::Parca,
            PushProtocol::Parca,
            ["container_runtime", "pod_uid"],
        ),
        (
            Protocol::Otlp,
            PushProtocol::Otlp,
            ["container.runtime", "k8s.pod.uid"],
        ),
    ] {
        let received: Vec<_> = bodies(ours, &series, None)
            .iter()
            .flat_map(|body| backend::decode(protocol, body).unwrap())
            .collect();
        assert!(!received.is_empty(), "{protocol:?}");
        for profile in &received {
            let label = |key: &str| profile.labels.get(key).map(String::as_str);
            assert_eq!(
                (label("container_id"), label(runtime), label(pod)),
                (Some("3f4b0c7f9d2a"), Some("cri"), Some("4d8a1c2e")),
                "{protocol:?}: {:?}",
                profile.labels
            );
        }
    }
}

#[test]
fn every_protocol_carries_a_go_programs_own_labels_whole() {
    let mut sample = row("api", "api.service", "handle", 2, 0);
    let long = "v".repeat(300);
    let label = |key: &str, value: &str| crate::sample::Label {
        key: key.to_owned().into(),
        attribute: key.to_owned().into(),
        value: crate::sample::LabelValue::Str(Arc::from(value)),
    };
    sample.labels = Some(Arc::new(crate::sample::RowLabels {
        replaces_thread: false,
        labels: vec![label("endpoint", "/heavy"), label("span_id", &long)],
    }));
    let series = one_program(sample);
    for (protocol, samples) in samples_by_protocol(&series) {
        for s in samples {
            let label = |key: &str| s.labels.get(key).map(String::as_str);
            assert_eq!(
                (label("endpoint"), label("span_id")),
                (Some("/heavy"), Some(long.as_str())),
                "{protocol:?}: {:?}",
                s.labels
            );
        }
    }
}

#[test]
fn every_protocol_carries_a_samples_trace_and_span() {
    let mut sample = row("api", "api.service", "handle", 2, 0);
    sample.labels = Some(Arc::new(crate::sample::RowLabels {
        replaces_thread: false,
        labels: crate::sample::trace_labels([0xab; 16], [0xcd; 8]),
    }));
    let series = one_program(sample);
    for (protocol, samples) in samples_by_protocol(&series) {
        for s in samples {
            let label = |key: &str| s.labels.get(key).map(String::as_str);
            assert_eq!(
                (label("trace_id"), label("span_id")),
                (
                    Some("ab".repeat(16).as_str()),
                    Some("cd".repeat(8).as_str())
                ),
                "{protocol:?} (OTLP: as the sample's link): {:?}",
                s.labels
            );
        }
    }
}

/// The samples each backend decodes from `series`' bodies (some in each).
fn samples_by_protocol(
    series: &[crate::output::push::series::Series],
) -> Vec<(Protocol, Vec<backend::ReceivedSample>)> {
    [
        (Protocol::Pyroscope, PushProtocol::Pyroscope),
        (Protocol::Parca, PushProtocol::Parca),
        (Protocol::Otlp, PushProtocol::Otlp),
    ]
    .into_iter()
    .map(|(protocol, ours)| {
        let samples: Vec<_> = bodies(ours, series, None)
            .iter()
            .flat_map(|body| backend::decode(protocol, body).unwrap())
            .flat_map(|p| p.samples)
            .collect();
        assert!(!samples.is_empty(), "{protocol:?}");
        (protocol, samples)
    })
    .collect()
}

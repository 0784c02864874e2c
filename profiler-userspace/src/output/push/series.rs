//! One push's profile split into series: one per program, labelled with
//! what the backends query by, each holding only that program's rows.
use std::collections::BTreeMap;

use crate::profile::{Profile, Sample};

/// A program's rows and the labels that name it in a backend.
#[derive(Clone, Debug)]
pub struct Series {
    /// `service_name`, `hostname`, then `container_id`, `container_runtime`,
    /// `pod_uid` and `cgroup` where
    /// known; sorted by name, no `__name__` (each protocol adds its own).
    pub labels: Vec<(&'static str, String)>,
    /// The program's rows, with the push's times and comments.
    pub profile: Profile,
}

impl Series {
    /// The value of label `name`.
    #[cfg(test)]
    #[must_use]
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// This series in pieces of at most `rows` rows each, split evenly,
    /// each under the same labels.
    #[must_use]
    pub fn pieces(&self, rows: usize) -> Vec<Series> {
        even_chunks(&self.profile.samples, rows)
            .map(|rows| Series {
                labels: self.labels.clone(),
                profile: Profile {
                    samples: rows.to_vec(),
                    comments: self.profile.comments.clone(),
                    ..self.profile.clone_empty()
                },
            })
            .collect()
    }
}

/// Most rows in one pprof: Pyroscope refuses a whole request for a
/// profile of more samples (`validation.max-profile-stacktrace-samples`,
/// 16000 by default), and its OTLP intake checks each profile as one.
pub const MAX_PROFILE_ROWS: usize = 16_000;

/// `items` in as few chunks of at most `max` as there can be, of even
/// sizes (40000 rows at most 16000 go as three of 13334, not two full and
/// a small one).
pub(super) fn even_chunks<T>(items: &[T], max: usize) -> std::slice::Chunks<'_, T> {
    let count = items.len().div_ceil(max.max(1));
    items.chunks(items.len().div_ceil(count.max(1)).max(1))
}

/// The program a row belongs to, as backends name services: its systemd
/// service, else its container (the short id, as `docker ps` shows it),
/// else its process name, else [`UNKNOWN_SERVICE`]: never empty, since
/// Pyroscope refuses a whole push for one empty `service_name`.
#[must_use]
pub fn service_name(sample: &Sample) -> String {
    let placement = &sample.placement;
    if placement.service.ends_with(".service") {
        placement.service.clone()
    } else if !placement.container_id.is_empty() {
        placement.container_id.chars().take(12).collect()
    } else if !sample.comm.is_empty() {
        sample.comm.to_string()
    } else {
        UNKNOWN_SERVICE.to_owned()
    }
}

/// The service name of a row with no name at all, as OpenTelemetry's
/// semantic conventions name a service without one.
pub const UNKNOWN_SERVICE: &str = "unknown_service";

/// Splits `profile` into one series per program (service name, container
/// and cgroup), in a stable order.
#[must_use]
pub fn split(profile: Profile, hostname: &str) -> Vec<Series> {
    let mut programs: BTreeMap<(String, String, String), Vec<Sample>> = BTreeMap::new();
    let empty = profile.clone_empty();
    for sample in profile.samples {
        let key = (
            service_name(&sample),
            sample.placement.container_id.clone(),
            sample.placement.cgroup.clone(),
        );
        programs.entry(key).or_default().push(sample);
    }
    programs
        .into_iter()
        .map(|((service, container_id, cgroup), samples)| {
            // The runtime and pod follow from the cgroup path.
            let (runtime, pod) = samples.first().map_or_else(Default::default, |s| {
                (
                    s.placement.container_runtime.clone(),
                    s.placement.pod_uid.clone(),
                )
            });
            let mut labels = Vec::with_capacity(6);
            if !cgroup.is_empty() {
                labels.push(("cgroup", cgroup));
            }
            if !container_id.is_empty() {
                labels.push(("container_id", container_id));
            }
            if !runtime.is_empty() {
                labels.push(("container_runtime", runtime));
            }
            labels.push(("hostname", hostname.to_owned()));
            if !pod.is_empty() {
                labels.push(("pod_uid", pod));
            }
            labels.push(("service_name", service));
            Series {
                labels,
                profile: Profile {
                    samples,
                    comments: profile.comments.clone(),
                    ..empty.clone_empty()
                },
            }
        })
        .collect()
}

impl Profile {
    /// The same profile without rows or comments.
    fn clone_empty(&self) -> Self {
        Self {
            view: self.view,
            start: self.start,
            duration_ns: self.duration_ns,
            period_ns: self.period_ns,
            samples: Vec::new(),
            comments: Vec::new(),
        }
    }
}

/// The name of this host, as `hostname` prints it.
#[must_use]
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::UNIX_EPOCH};

    use profiler_common::sample::ThreadState;

    use super::*;
    use crate::{
        process::cgroup::Placement,
        profile::{Location, View},
    };

    fn row(comm: &str, service: &str, container_id: &str, samples: u64) -> Sample {
        Sample {
            pid: 7,
            tid: 7,
            comm: Arc::from(comm),
            thread: comm.to_owned(),
            placement: Arc::new(Placement {
                cgroup: if service.is_empty() {
                    String::new()
                } else {
                    format!("/system.slice/{service}")
                },
                service: service.to_owned(),
                container_id: container_id.to_owned(),
                container_runtime: String::new(),
                pod_uid: String::new(),
            }),
            state: ThreadState::Running,
            stack: vec![Location::marker("f".to_owned())],
            samples,
            off_cpu_ns: 0,
            off_cpu_count: 0,
            labels: None,
            runtime_ns: 0,
            waker_ns: 0,
            critical_ns: 0,
            goroutine_waker_ns: 0,
            off_cpu_in_wall: true,
        }
    }

    #[test]
    fn each_program_is_a_series_named_by_unit_then_container_then_comm_never_empty() {
        let container = "3f4b".repeat(16);
        let profile = Profile {
            view: View::Wall,
            start: UNIX_EPOCH,
            duration_ns: 1,
            period_ns: 1,
            samples: vec![
                row("nginx", "nginx.service", "", 1),
                row("bash", "session-3.scope", "", 2),
                row("worker", "", &container, 3),
                row("nginx", "nginx.service", "", 4),
                row("", "", "", 5),
            ],
            comments: vec!["x=1".to_owned()],
        };
        let series = split(profile, "host1");
        let names: Vec<_> = series
            .iter()
            .map(|s| (s.label("service_name").unwrap(), s.profile.samples.len()))
            .collect();
        assert_eq!(
            names,
            [
                ("3f4b3f4b3f4b", 1),
                ("bash", 1),
                ("nginx.service", 2),
                (UNKNOWN_SERVICE, 1)
            ]
        );
        let nginx = &series[2];
        assert_eq!(
            nginx.labels,
            [
                ("cgroup", "/system.slice/nginx.service".to_owned()),
                ("hostname", "host1".to_owned()),
                ("service_name", "nginx.service".to_owned()),
            ]
        );
        assert_eq!(series[0].label("container_id"), Some(container.as_str()));
        assert_eq!(nginx.profile.comments, ["x=1"]);
    }

    #[test]
    fn a_pods_container_is_a_series_labelled_with_its_runtime_and_pod() {
        let container = "3f4b".repeat(16);
        let mut sample = row("worker", "", &container, 1);
        sample.placement = Arc::new(Placement {
            container_runtime: "containerd".to_owned(),
            pod_uid: "4d8a1c2e-93f0-4b7a-a1d2-3c4e5f6a7b8c".to_owned(),
            ..(*sample.placement).clone()
        });
        let profile = Profile {
            view: View::Wall,
            start: UNIX_EPOCH,
            duration_ns: 1,
            period_ns: 1,
            samples: vec![sample],
            comments: Vec::new(),
        };
        let series = split(profile, "host1");
        let names: Vec<&str> = series[0].labels.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            [
                "container_id",
                "container_runtime",
                "hostname",
                "pod_uid",
                "service_name"
            ],
            "sorted by name"
        );
        assert_eq!(series[0].label("container_runtime"), Some("containerd"));
        assert_eq!(
            series[0].label("pod_uid"),
            Some("4d8a1c2e-93f0-4b7a-a1d2-3c4e5f6a7b8c")
        );
    }

    #[test]
    fn chunks_are_as_few_and_as_even_as_can_be() {
        let sizes = |len: usize, max| -> Vec<usize> {
            let items = vec![0u8; len];
            even_chunks(&items, max).map(<[u8]>::len).collect()
        };
        assert_eq!(sizes(40_000, 16_000), [13_334, 13_334, 13_332]);
        assert_eq!(sizes(16_000, 16_000), [16_000]);
        assert_eq!(sizes(16_001, 16_000), [8001, 8000]);
        assert_eq!(sizes(3, 0), [1, 1, 1], "a zero bound still makes progress");
        assert!(sizes(0, 16_000).is_empty());
    }
}

//! Which cgroup, container and systemd unit a process runs in, from
//! `/proc/PID/cgroup`: the `cgroup`, `container_id` and `service` labels of
//! every sample, so `go tool pprof -tagfocus=service=nginx.service` or
//! `-tagfocus=container_id=...` narrows a system-wide profile.

/// A process's place, as labels; empty strings where there is none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Placement {
    /// The cgroup path: the unified (v2) hierarchy's, else systemd's
    /// named v1 hierarchy's, else the first non-root v1 path.
    pub cgroup: String,
    /// A 64-hex-digit container id (Docker, containerd, CRI-O, Podman,
    /// Kubernetes pods' containers) found in a cgroup path.
    pub container_id: String,
    /// The innermost systemd unit (`.service` or `.scope`) of the path.
    pub service: String,
}

/// Reads and parses `/proc/PID/cgroup`; `None` when the process is gone.
#[must_use]
pub fn read(pid: u32) -> Option<Placement> {
    crate::process::procfs::read(format!("/proc/{pid}/cgroup"))
        .ok()
        .map(|text| parse(&text))
}

/// Parses the text of a `/proc/PID/cgroup` file.
#[must_use]
pub fn parse(text: &str) -> Placement {
    // hierarchy-id:controllers:path
    let entries: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ':');
            let _id = fields.next()?;
            Some((fields.next()?, fields.next()?))
        })
        .collect();
    let non_root = |(_, path): &&(&str, &str)| *path != "/";
    let unified = entries.iter().filter(non_root).find(|(c, _)| c.is_empty());
    let systemd = entries
        .iter()
        .filter(non_root)
        .find(|(c, _)| *c == "name=systemd");
    let any = entries.iter().find(non_root);
    let cgroup = unified.or(systemd).or(any).map_or("/", |(_, path)| path);
    let service = unified
        .or(systemd)
        .and_then(|(_, path)| innermost_unit(path))
        .unwrap_or_default();
    let container_id = entries
        .iter()
        .find_map(|(_, path)| container_id(path))
        .unwrap_or_default();
    Placement {
        cgroup: cgroup.to_owned(),
        container_id: container_id.to_owned(),
        service: service.to_owned(),
    }
}

/// The last path component that names a systemd service or scope (unit
/// suffixes are lower case: systemd names them so).
#[expect(
    clippy::case_sensitive_file_extension_comparisons,
    reason = "unit suffixes, not file extensions"
)]
fn innermost_unit(path: &str) -> Option<&str> {
    path.rsplit('/')
        .find(|c| c.ends_with(".service") || c.ends_with(".scope"))
}

/// The last run of exactly 64 hex digits in `path`, as container runtimes
/// name their cgroups: `docker-ID.scope`, `/docker/ID`,
/// `cri-containerd-ID.scope`, `crio-ID.scope`, `libpod-ID.scope`,
/// `/kubepods/.../ID`.
fn container_id(path: &str) -> Option<&str> {
    path.rsplit(['/', '-', '.'])
        .find(|part| part.len() == 64 && part.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f4b0c7f9d2a1e6b8c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b";

    #[test]
    fn a_systemd_service_on_cgroup_v2() {
        let placement = parse("0::/system.slice/nginx.service\n");
        assert_eq!(placement.cgroup, "/system.slice/nginx.service");
        assert_eq!(placement.service, "nginx.service");
        assert_eq!(placement.container_id, "");
    }

    #[test]
    fn containers_of_each_runtime() {
        for path in [
            format!("/system.slice/docker-{ID}.scope"),
            format!("/docker/{ID}"),
            format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-{ID}.scope"
            ),
            format!("/machine.slice/libpod-{ID}.scope/container"),
            format!("/kubepods/besteffort/pod0a1b/{ID}"),
        ] {
            let placement = parse(&format!("0::{path}\n"));
            assert_eq!(placement.container_id, ID, "{path}");
            assert_eq!(placement.cgroup, path);
        }
    }

    #[test]
    fn hybrid_hierarchy_prefers_unified_then_systemd() {
        let hybrid = "9:name=systemd:/user.slice/user-0.slice/session-3.scope\n\
                      4:memory:/user.slice\n0::/\n";
        let placement = parse(hybrid);
        assert_eq!(placement.cgroup, "/user.slice/user-0.slice/session-3.scope");
        assert_eq!(placement.service, "session-3.scope");
        // Only a v1 controller path: it is the cgroup, but names no unit.
        let v1 = parse("4:memory:/process_api/00abe664\n0::/\n");
        assert_eq!(v1.cgroup, "/process_api/00abe664");
        assert_eq!(v1.service, "");
        assert_eq!(parse("0::/\n").cgroup, "/");
    }

    #[test]
    fn not_an_id_unless_exactly_64_hex_digits() {
        assert_eq!(container_id("/system.slice/docker-abc.scope"), None);
        assert_eq!(container_id(&format!("/x/{ID}0")), None);
        assert_eq!(container_id(&format!("/x/{}", ID.replace('a', "g"))), None);
    }
}

//! Which cgroup, container and systemd unit a process runs in, from
//! `/proc/PID/cgroup`: the `cgroup`, `container_id`, `container_runtime`,
//! `pod_uid` and `service` labels of every sample, so `go tool pprof
//! -tagfocus=service=nginx.service` or `-tagfocus=container_id=...`
//! narrows a system-wide profile.
//!
//! The layouts read, as each runtime names its cgroups (systemd driver,
//! then cgroupfs driver):
//! - Docker: `docker-ID.scope`, `/docker/ID`;
//! - containerd under Kubernetes: `kubepods-QOS-podUID.slice/
//!   cri-containerd-ID.scope`, `/kubepods/QOS/podUID/ID` (a CRI runtime,
//!   not named by the path);
//! - CRI-O: `crio-ID.scope`; Podman: `libpod-ID.scope`;
//! - systemd-nspawn: `machine.slice/machine-NAME.scope` (the id is the
//!   machine's name).

/// A process's place, as labels; empty strings where there is none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Placement {
    /// The cgroup path: the unified (v2) hierarchy's, else systemd's
    /// named v1 hierarchy's, else the first non-root v1 path.
    pub cgroup: String,
    /// A 64-hex-digit container id (Docker, containerd, CRI-O, Podman,
    /// Kubernetes pods' containers) found in a cgroup path, or a
    /// systemd-nspawn machine's name.
    pub container_id: String,
    /// Which runtime the path says runs it: `docker`, `containerd`,
    /// `cri-o`, `podman`, `systemd-nspawn`, or `cri` (a Kubernetes pod's
    /// container under the cgroupfs driver, whose path names no runtime).
    pub container_runtime: String,
    /// The Kubernetes pod's UID, where the path carries one.
    pub pod_uid: String,
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
    let container = entries.iter().find_map(|(_, path)| container(path));
    let pod_uid = entries
        .iter()
        .find_map(|(_, path)| pod_uid(path))
        .unwrap_or_default();
    let (container_id, container_runtime) = container.unwrap_or_default();
    Placement {
        cgroup: cgroup.to_owned(),
        container_id,
        container_runtime: container_runtime.to_owned(),
        pod_uid,
        service: service.to_owned(),
    }
}

/// The container of a cgroup path: its id and its runtime.
fn container(path: &str) -> Option<(String, &'static str)> {
    if let Some(id) = container_id(path) {
        let component = path.rsplit('/').find(|c| c.contains(id)).unwrap_or("");
        let before = &component[..component.find(id).unwrap_or(0)];
        let runtime = match before {
            "docker-" => "docker",
            "cri-containerd-" => "containerd",
            "crio-" => "cri-o",
            "libpod-" => "podman",
            "" if path.contains("/docker/") => "docker",
            "" if path.contains("kubepods") => "cri",
            _ => "",
        };
        return Some((id.to_owned(), runtime));
    }
    let machine = path
        .split('/')
        .skip_while(|c| *c != "machine.slice")
        .nth(1)?
        .strip_prefix("machine-")?
        .strip_suffix(".scope")?;
    Some((unescape_unit(machine), "systemd-nspawn"))
}

/// The pod UID of a Kubernetes cgroup path: `...-podUID.slice` (the
/// systemd driver writes the UID's dashes as underscores) or `/podUID/`.
fn pod_uid(path: &str) -> Option<String> {
    path.split('/').find_map(|component| {
        if let Some(slice) = component.strip_suffix(".slice") {
            let uid = slice.rsplit('-').next()?.strip_prefix("pod")?;
            return is_uid(uid).then(|| uid.replace('_', "-"));
        }
        let uid = component.strip_prefix("pod")?;
        is_uid(uid).then(|| uid.to_owned())
    })
}

/// A UID's 32 hex digits in groups, with dashes or underscores.
fn is_uid(text: &str) -> bool {
    text.len() == 36
        && text
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'-' || b == b'_')
}

/// A unit name's escapes undone (`\x2d` is `-`).
fn unescape_unit(name: &str) -> String {
    let mut out = String::new();
    let mut rest = name;
    while let Some(at) = rest.find("\\x") {
        out.push_str(&rest[..at]);
        let byte = rest
            .get(at + 2..at + 4)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        if let Some(byte) = byte {
            out.push(char::from(byte));
            rest = &rest[at + 4..];
        } else {
            out.push('\\');
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out
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
    fn each_runtime_and_pod_is_named() {
        let uid = "4d8a1c2e-93f0-4b7a-a1d2-3c4e5f6a7b8c";
        for (path, runtime, pod) in [
            (format!("/system.slice/docker-{ID}.scope"), "docker", ""),
            (format!("/docker/{ID}"), "docker", ""),
            (
                format!(
                    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{ID}.scope",
                    uid.replace('-', "_")
                ),
                "containerd",
                uid,
            ),
            (format!("/kubepods/besteffort/pod{uid}/{ID}"), "cri", uid),
            (format!("/system.slice/crio-{ID}.scope"), "cri-o", ""),
            (
                format!("/machine.slice/libpod-{ID}.scope/container"),
                "podman",
                "",
            ),
        ] {
            let placement = parse(&format!("0::{path}\n"));
            assert_eq!(
                (
                    placement.container_id.as_str(),
                    placement.container_runtime.as_str(),
                    placement.pod_uid.as_str()
                ),
                (ID, runtime, pod),
                "{path}"
            );
        }
        let nspawn = parse("0::/machine.slice/machine-web\\x2d1.scope/payload\n");
        assert_eq!(
            (
                nspawn.container_id.as_str(),
                nspawn.container_runtime.as_str()
            ),
            ("web-1", "systemd-nspawn")
        );
        let host = parse("0::/system.slice/nginx.service\n");
        assert_eq!(
            (host.container_runtime.as_str(), host.pod_uid.as_str()),
            ("", "")
        );
    }

    #[test]
    fn not_an_id_unless_exactly_64_hex_digits() {
        assert_eq!(container_id("/system.slice/docker-abc.scope"), None);
        assert_eq!(container_id(&format!("/x/{ID}0")), None);
        assert_eq!(container_id(&format!("/x/{}", ID.replace('a', "g"))), None);
    }
}

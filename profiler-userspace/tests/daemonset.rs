//! The Kubernetes DaemonSet (`packaging/daemonset.yaml`), parsed: a valid
//! DaemonSet whose pod sees the node's processes, holds exactly the
//! capabilities the systemd unit keeps, passes arguments the daemon
//! accepts, and keeps its output on the node.
use std::path::Path;

use profiler_userspace::cli::{self, KernelLimits};
use yaml_rust2::{Yaml, YamlLoader};

fn packaging(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../packaging")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn strings(list: &Yaml) -> Vec<&str> {
    list.as_vec()
        .map(|v| v.iter().filter_map(Yaml::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn the_daemonset_sees_the_node_with_the_units_capabilities() {
    let docs = YamlLoader::load_from_str(&packaging("daemonset.yaml")).expect("valid YAML");
    assert_eq!(docs.len(), 1, "one document");
    let doc = &docs[0];
    assert_eq!(doc["apiVersion"].as_str(), Some("apps/v1"));
    assert_eq!(doc["kind"].as_str(), Some("DaemonSet"));
    let selector = &doc["spec"]["selector"]["matchLabels"];
    let template = &doc["spec"]["template"];
    assert_eq!(
        selector, &template["metadata"]["labels"],
        "the selector picks its pods"
    );
    let pod = &template["spec"];
    assert_eq!(pod["hostPID"].as_bool(), Some(true), "the node's processes");
    let containers = pod["containers"].as_vec().expect("containers");
    assert_eq!(containers.len(), 1);
    let container = &containers[0];

    // The unit's capability set, without the CAP_ prefix.
    let unit = packaging("profiler.service");
    let mut from_unit: Vec<&str> = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("the unit's capabilities")
        .split_whitespace()
        .map(|c| c.trim_start_matches("CAP_"))
        .collect();
    let security = &container["securityContext"];
    let mut added = strings(&security["capabilities"]["add"]);
    from_unit.sort_unstable();
    added.sort_unstable();
    assert_eq!(added, from_unit, "the unit's capabilities, no more");
    assert_eq!(strings(&security["capabilities"]["drop"]), ["ALL"]);
    assert_eq!(security["privileged"].as_bool(), Some(false));

    // Arguments the daemon accepts, profiling the whole node.
    let args = strings(&container["args"]);
    let config = cli::parse(
        std::iter::once("profiler").chain(args.iter().copied()),
        KernelLimits {
            max_sample_rate: u64::MAX,
        },
    )
    .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(args.contains(&"--all"), "{args:?}");
    let output = args[args
        .iter()
        .position(|a| *a == "--output-dir")
        .expect("--output-dir")
        + 1];
    assert_eq!(config.output_dir.to_str(), Some(output));

    // The output directory is the node's, and every mount has a volume.
    let volumes = pod["volumes"].as_vec().expect("volumes");
    for mount in container["volumeMounts"].as_vec().expect("mounts") {
        let name = mount["name"].as_str().expect("a mount's name");
        let volume = volumes
            .iter()
            .find(|v| v["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("no volume {name}"));
        assert!(
            volume["hostPath"]["path"].as_str().is_some(),
            "{name}: a hostPath"
        );
    }
    assert!(
        container["volumeMounts"]
            .as_vec()
            .unwrap()
            .iter()
            .any(|m| m["mountPath"].as_str() == Some(output)),
        "{output} is mounted from the node"
    );
}

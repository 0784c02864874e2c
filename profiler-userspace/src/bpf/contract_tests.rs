//! The kernel/user contract, checked against the eBPF object as built:
//! the maps and globals it defines are exactly those `profiler_common`
//! names, so a name changed on one side only fails here rather than at
//! load time on a user's machine.
use std::collections::BTreeSet;

use object::{Object as _, ObjectSection as _, ObjectSymbol as _};
use profiler_common::maps;

use super::load::EBPF_OBJECT;

/// aya-log's own map, which the daemon never names.
const AYA_LOG_MAP: &str = "AYA_LOGS";

/// Names of the object's symbols defined in sections whose name satisfies
/// `section`.
fn symbols_in(section: impl Fn(&str) -> bool) -> BTreeSet<String> {
    let file = object::File::parse(EBPF_OBJECT).expect("the eBPF object parses as ELF");
    file.symbols()
        .filter(|symbol| {
            symbol
                .section_index()
                .and_then(|i| file.section_by_index(i).ok())
                .and_then(|s| s.name().ok().map(&section))
                .unwrap_or(false)
        })
        .filter_map(|symbol| symbol.name().ok().map(str::to_owned))
        .filter(|name| !name.is_empty() && !name.starts_with('.'))
        .collect()
}

#[test]
fn the_object_defines_exactly_the_maps_profiler_common_names() {
    let built = symbols_in(|s| s == "maps" || s == ".maps");
    let mut named: BTreeSet<String> = maps::ALL.iter().map(|&m| m.to_owned()).collect();
    named.insert(AYA_LOG_MAP.to_owned());
    assert_eq!(
        built, named,
        "maps in the object vs profiler_common::maps::ALL"
    );
}

#[test]
fn the_object_defines_every_global_the_daemon_sets() {
    let built =
        symbols_in(|s| s.starts_with(".data") || s.starts_with(".rodata") || s.starts_with(".bss"));
    for global in maps::GLOBALS {
        assert!(
            built.contains(global),
            "no global {global} in the object: {built:?}"
        );
    }
    // The product's programs check no test knob.
    for global in maps::TEST_KNOB_GLOBALS {
        assert_eq!(
            built.contains(global),
            cfg!(feature = "test-knobs"),
            "test knob {global} in the object: {built:?}"
        );
    }
}

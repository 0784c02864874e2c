//! What the profiler needs of the kernel, probed in the kernel's BTF: each
//! feature by a value that the release bringing it added to one of the
//! kernel's own enums (the helper ids, the map types), so a backport
//! counts and a kernel's version string does not.
use super::btf_fields::KernelTypes;

/// A kernel feature the profiler cannot run without.
#[derive(Debug, PartialEq, Eq)]
pub struct Feature {
    /// What it is, and what needs it.
    pub what: &'static str,
    /// The mainline release that brought it.
    pub since: &'static str,
    /// The enum value that tells it is there.
    marker: &'static str,
}

/// Every feature required, oldest first. BPF atomics (5.12) and tp_btf
/// (5.5) have no enum value of their own; the later features imply them.
/// So has 6.1's per-entry allocation of hash maps in perf_event programs:
/// the user ring buffer came in the same release.
pub const REQUIRED: [Feature; 3] = [
    Feature {
        what: "task storage maps (each thread's off-CPU state)",
        since: "5.11",
        marker: "BPF_MAP_TYPE_TASK_STORAGE",
    },
    Feature {
        what: "the bpf_loop helper (the user stack walk)",
        since: "5.17",
        marker: "BPF_FUNC_loop",
    },
    Feature {
        what: "hash maps allocated per entry in perf_event programs (the window's maps)",
        since: "6.1",
        marker: "BPF_MAP_TYPE_USER_RINGBUF",
    },
];

/// The first required feature `types` lacks.
#[must_use]
pub fn missing(types: &KernelTypes) -> Option<&'static Feature> {
    REQUIRED.iter().find(|f| !types.has_enum_value(f.marker))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::btf_fields::tests::{blob, info};

    /// A kernel whose enum has the values `names` (offsets into `STRINGS`).
    fn kernel(names: &[u32]) -> KernelTypes {
        const STRINGS: &[u8] =
            b"\0bpf_map_type\0BPF_MAP_TYPE_TASK_STORAGE\0BPF_FUNC_loop\0BPF_MAP_TYPE_USER_RINGBUF\0";
        let entries: Vec<u32> = names.iter().flat_map(|&n| [n, 0]).collect();
        let vlen = u32::try_from(names.len()).unwrap();
        KernelTypes::parse(&blob(STRINGS, &[(1, info(6, vlen, false), 4, &entries)])).unwrap()
    }

    #[test]
    fn the_first_feature_missing_is_named() {
        const TASK_STORAGE: u32 = 14;
        const LOOP: u32 = 40;
        const USER_RINGBUF: u32 = 54;
        assert_eq!(missing(&kernel(&[TASK_STORAGE, LOOP, USER_RINGBUF])), None);
        let before_6_1 = missing(&kernel(&[TASK_STORAGE, LOOP])).unwrap();
        assert_eq!(before_6_1.since, "6.1");
        let before_5_17 = missing(&kernel(&[TASK_STORAGE])).unwrap();
        assert_eq!(before_5_17.since, "5.17");
        assert!(before_5_17.what.contains("bpf_loop"));
        assert_eq!(missing(&kernel(&[])).unwrap().since, "5.11", "oldest first");
    }

    #[test]
    fn this_kernel_has_every_feature() {
        let types = KernelTypes::from_sys_fs().unwrap();
        assert_eq!(missing(&types), None);
    }
}

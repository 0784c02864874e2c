//! A small BTF blob built by hand, with what vmlinux has around the fields
//! the scheduler offsets go through: a typedef'd nested struct, an
//! anonymous union, bitfields, kinds with trailing data to skip.
use super::*;

/// Builds BTF from (name, info, size/type, trailing u32s) type records.
pub(in crate::bpf) fn blob(strings: &[u8], types: &[(u32, u32, u32, &[u32])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, info, size, rest) in types {
        for word in [*name, *info, *size].iter().chain(rest.iter()) {
            body.extend_from_slice(&word.to_ne_bytes());
        }
    }
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC.to_ne_bytes());
    out.extend_from_slice(&[1, 0]);
    let len = |n: usize| u32::try_from(n).unwrap();
    for word in [24, 0, len(body.len()), len(body.len()), len(strings.len())] {
        out.extend_from_slice(&word.to_ne_bytes());
    }
    out.extend_from_slice(&body);
    out.extend_from_slice(strings);
    out
}

pub(in crate::bpf) const fn info(kind: u32, vlen: u32, kind_flag: bool) -> u32 {
    (kind_flag as u32) << 31 | kind << 24 | vlen
}

/// String offsets into `STRINGS`.
const STRINGS: &[u8] = b"\0u64\0inner\0a\0b\0inner_t\0x\0outer\0flag\0in\0p\0e\0";
const U64: u32 = 1;
const INNER: u32 = 5;
const A: u32 = 11;
const B: u32 = 13;
const INNER_T: u32 = 15;
const X: u32 = 23;
const OUTER: u32 = 25;
const FLAG: u32 = 31;
const IN: u32 = 36;
const P: u32 = 39;
const E: u32 = 41;

fn types() -> KernelTypes {
    let data = blob(
        STRINGS,
        &[
            // 1: u64
            (U64, info(1, 0, false), 8, &[64]),
            // 2: struct inner { u64 a; u64 b; }
            (INNER, info(4, 2, false), 16, &[A, 1, 0, B, 1, 64]),
            // 3: typedef struct inner inner_t
            (INNER_T, info(8, 0, false), 2, &[]),
            // 4: union { u64 x; }
            (0, info(5, 1, false), 8, &[X, 1, 0]),
            // 5: struct inner *
            (0, info(2, 0, false), 2, &[]),
            // 6: enum e { ... two values }: trailing data to skip
            (E, info(6, 2, false), 4, &[A, 0, B, 1]),
            // 7: FUNC a (linkage static, type 8 would be its proto)
            (A, info(12, 0, false), 8, &[]),
            // 8: struct outer { u64 flag:1; union {x}; inner_t in; inner *p; }
            (
                OUTER,
                info(4, 4, true),
                48,
                &[FLAG, 1, 1 << 24, 0, 4, 64, IN, 3, 128, P, 5, 256],
            ),
            // 9: enum64 { x = 1 << 40 }
            (E, info(19, 1, false), 8, &[X, 0, 1 << 8]),
        ],
    );
    KernelTypes::parse(&data).unwrap()
}

#[test]
fn offsets_follow_paths_typedefs_and_anonymous_members() {
    let t = types();
    assert_eq!(t.offset("outer", "flag", "").unwrap(), 0);
    assert_eq!(t.offset("outer", "x", "").unwrap(), 8, "through the union");
    assert_eq!(
        t.offset("outer", "in.b", "").unwrap(),
        24,
        "through a typedef"
    );
    assert_eq!(t.offset("outer", "p", "").unwrap(), 32, "after an enum");
    assert_eq!(t.offset("inner", "b", "").unwrap(), 8);
}

#[test]
fn enum_values_are_found_by_name() {
    let t = types();
    assert!(t.has_enum_value("a"));
    assert!(t.has_enum_value("b"));
    assert!(t.has_enum_value("x"), "an enum64's value");
    assert!(!t.has_enum_value("outer"), "a struct's name");
    assert!(!t.has_enum_value("flag"), "a member's name");
}

#[test]
fn functions_are_found_by_name() {
    let t = types();
    assert_eq!(t.func_id("a"), Some(7));
    assert_eq!(t.func_id("b"), None, "b names only a member");
    assert_eq!(t.func_id("outer"), None, "outer is a struct");
}

#[test]
fn this_kernels_task_work_kfuncs_are_found() {
    let t = KernelTypes::from_sys_fs().unwrap();
    for name in ["bpf_task_work_schedule_resume_impl", "bpf_preempt_disable"] {
        assert!(t.func_id(name).is_some(), "{name}");
    }
}

#[test]
fn missing_names_say_what_is_missing_and_why() {
    let t = types();
    let err = t.offset("outer", "in.c", "needs CONFIG_X").unwrap_err();
    assert_eq!(
        err.to_string(),
        "the kernel's BTF has no field outer.in.c (needs CONFIG_X)"
    );
    assert!(
        matches!(
            t.offset("outer", "p.a", ""),
            Err(BtfFieldError::NoField(..))
        ),
        "a pointer is not followed"
    );
    assert!(matches!(
        t.offset("rq", "clock", ""),
        Err(BtfFieldError::NoStruct(name)) if name == "rq"
    ));
}

#[test]
fn malformed_input_is_an_error() {
    let data = blob(STRINGS, &[(OUTER, info(4, 4, false), 48, &[FLAG, 1])]);
    assert!(matches!(
        KernelTypes::parse(&data),
        Err(BtfFieldError::Malformed(
            "truncated" | "a section runs past the end"
        ))
    ));
    assert!(matches!(
        KernelTypes::parse(b"not btf at all, long enough for a header"),
        Err(BtfFieldError::Malformed(_))
    ));
}

#[test]
fn this_kernels_scheduler_fields_are_found() {
    let offsets = KernelTypes::from_sys_fs().unwrap().sched_offsets().unwrap();
    // run_delay comes before last_queued in struct sched_info; none of the
    // fields is its struct's first. (That the offsets are right is checked
    // by the verifier, which matches every load against the same BTF, and
    // by the off-CPU state tests.)
    assert!(offsets.last_queued > offsets.run_delay);
    assert!(offsets.clock > 0 && offsets.rq > 0 && offsets.cfs_rq > 0);
    // struct task_struct declares pid_t pid; then pid_t tgid; next to it.
    assert_eq!(offsets.tgid, offsets.pid + 4);
    // unsigned int flags comes early in task_struct, well before pid.
    assert!(offsets.flags > 0 && offsets.flags < offsets.pid);
}

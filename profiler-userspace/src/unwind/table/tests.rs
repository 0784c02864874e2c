//! The table builder against framehop (samply's unwinder), which reads the
//! same CFI independently: for random PCs of real binaries, both must give
//! the same caller (return address, stack pointer and frame pointer).
use std::num::NonZeroU64;

use framehop::{
    ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder as _,
    x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64},
};
use object::{Object as _, ObjectSection as _};
use profiler_common::unwind::{
    ROW_SEARCH_STEPS, Regs, RowKind, Step, UnwindMapping, bucket_of, bucket_rows, search, step,
};

use super::*;

/// Distinct, non-zero "memory" contents, so a read from the wrong address
/// gives a different answer.
fn memory(addr: u64) -> u64 {
    addr ^ 0x5555_0000_0000_0000
}

/// What our table says the caller of `pc` is, found as the kernel finds
/// it: through the bucket index of the table's run.
/// `kernel_run` is `table.kernel_run()`.
fn ours(
    table: &Table,
    (packed, run): &(u32, Vec<UnwindRow>),
    pc: u64,
    regs: Regs,
) -> Option<(u64, u64, u64)> {
    let m = UnwindMapping {
        table: *packed,
        ..UnwindMapping::default()
    };
    let rel = u32::try_from(pc - table.base).unwrap();
    let bucket = bucket_of(rel, m.bucket_shift(), m.rows());
    let range = bucket_rows(m.rows(), bucket, |b| {
        run.get((m.rows() + b) as usize).map(|entry| entry.pc)
    })?;
    let i = search(range, u64::from(rel), ROW_SEARCH_STEPS, |i| {
        Some(u64::from(run[i as usize].pc))
    })?;
    let row = run[i as usize];
    match step(
        RowKind::from_raw(row.kind),
        row.cfa_offset,
        row.rbp_offset,
        &regs,
    ) {
        Step::Frame { cfa, ra_at, bp_at } => {
            Some((memory(ra_at), cfa, bp_at.map_or(regs.bp, memory)))
        }
        Step::End | Step::Signal { .. } => None,
    }
}

/// What framehop says, reading the same sections of the same file.
fn framehop_module(data: &[u8]) -> Module<Vec<u8>> {
    let file = object::File::parse(data).unwrap();
    let range = |name: &str| {
        file.section_by_name(name)
            .map(|s| s.address()..s.address() + s.size())
    };
    let bytes = |name: &str| {
        file.section_by_name(name)
            .and_then(|s| s.uncompressed_data().ok())
            .map(std::borrow::Cow::into_owned)
    };
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: range(".text"),
        text: bytes(".text"),
        got_svma: range(".got"),
        eh_frame_svma: range(".eh_frame"),
        eh_frame: bytes(".eh_frame"),
        eh_frame_hdr_svma: range(".eh_frame_hdr"),
        eh_frame_hdr: bytes(".eh_frame_hdr"),
        debug_frame: bytes(".debug_frame"),
        ..ExplicitModuleSectionInfo::default()
    };
    Module::new("binary".into(), 0..u64::MAX / 2, 0, info)
}

/// Compares the callers of `samples` random table PCs of the file at
/// `path`; returns how many PCs were compared.
fn compare_with_framehop(path: &str, samples: usize) -> usize {
    let data = std::fs::read(path).unwrap();
    let info = build(&data).unwrap();
    let table = &info.table;
    assert!(table.rows.len() > 100, "{path}: {} rows", table.rows.len());
    let mut unwinder = UnwinderX86_64::new();
    unwinder.add_module(framehop_module(&data));
    let mut cache = CacheX86_64::new();
    let kernel_run = table.kernel_run();

    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for _ in 0..samples {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let i = usize::try_from(rng % (table.rows.len() as u64 - 1)).unwrap();
        let (row, next) = (table.rows[i], table.rows[i + 1]);
        let kind = RowKind::from_raw(row.kind);
        if !matches!(kind, RowKind::Rsp | RowKind::Rbp) {
            continue;
        }
        let pc = table.base + u64::from(row.pc) + (rng >> 32) % u64::from(next.pc - row.pc);
        let regs = Regs {
            pc,
            sp: 0x7ff0_0000_0000,
            bp: 0x7ff0_0010_0000,
        };
        let want = ours(table, &kernel_run, pc, regs);
        let mut fh_regs = UnwindRegsX86_64::new(pc + 1, regs.sp, regs.bp);
        let got = unwinder
            .unwind_frame(
                FrameAddress::ReturnAddress(NonZeroU64::new(pc + 1).unwrap()),
                &mut fh_regs,
                &mut cache,
                &mut |addr| Ok(memory(addr)),
            )
            .ok()
            .flatten()
            .map(|ra| (ra, fh_regs.sp(), fh_regs.bp()));
        compared += 1;
        if want != got {
            mismatches.push(format!(
                "pc {pc:#x} {row:?}: ours {want:x?} framehop {got:x?}"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{path}: {} of {compared} differ:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(20)].join("\n")
    );
    compared
}

/// The libc this test process runs with.
fn libc_path() -> String {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so"))
        .expect("libc mapped")
        .to_owned()
}

#[test]
fn agrees_with_framehop_on_libc() {
    assert!(compare_with_framehop(&libc_path(), 3000) > 1000);
}

#[test]
fn agrees_with_framehop_on_our_own_binary() {
    let exe = std::env::current_exe().unwrap();
    assert!(compare_with_framehop(exe.to_str().unwrap(), 3000) > 1000);
}

#[test]
fn libc_has_signal_end_and_plt_rows() {
    let info = build(&std::fs::read(libc_path()).unwrap()).unwrap();
    let kinds: Vec<RowKind> = info
        .table
        .rows
        .iter()
        .map(|r| RowKind::from_raw(r.kind))
        .collect();
    assert_eq!(info.table.source, ".eh_frame");
    // __restore_rt is marked as a signal frame; clone/thread start mark the
    // end of the stack with an undefined return address.
    assert!(kinds.contains(&RowKind::Signal), "signal trampoline");
    assert!(kinds.contains(&RowKind::End), "end of stack");
    // Rows are sorted, start at the base, and end with a frame-pointer row.
    assert_eq!(info.table.rows[0].pc, 0);
    assert!(info.table.rows.windows(2).all(|w| w[0].pc < w[1].pc));
    assert_eq!(
        RowKind::from_raw(info.table.rows.last().unwrap().kind),
        RowKind::FramePointer
    );
}

#[test]
fn plt_expression_is_recognised() {
    // binutils' .plt CFA: rsp + 8 + ((rip & 15) >= 11) << 3
    let expr = [0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22];
    assert_eq!(plt_threshold(&expr), Some(11));
    assert_eq!(plt_threshold(&expr[..10]), None);
    let mut other = expr;
    other[1] = 16;
    assert_eq!(plt_threshold(&other), None);
}

#[test]
fn gaps_between_functions_walk_by_frame_pointer() {
    let rule = (RowKind::Rsp, 8, 0);
    let spans = vec![
        Span {
            start: 0x1000,
            end: 0x1010,
            rule,
        },
        Span {
            start: 0x1010,
            end: 0x1020,
            rule: (RowKind::Rsp, 16, 0),
        },
        Span {
            start: 0x1040,
            end: 0x1050,
            rule,
        },
    ];
    let table = rows_from_spans(spans, ".eh_frame", 0).unwrap();
    let rows: Vec<(u32, RowKind, u16)> = table
        .rows
        .iter()
        .map(|r| (r.pc, RowKind::from_raw(r.kind), r.cfa_offset))
        .collect();
    assert_eq!(table.base, 0x1000);
    assert_eq!(
        rows,
        [
            (0x00, RowKind::Rsp, 8),
            (0x10, RowKind::Rsp, 16),
            (0x20, RowKind::FramePointer, 0),
            (0x40, RowKind::Rsp, 8),
            (0x50, RowKind::FramePointer, 0),
        ]
    );
}

/// A Go program (as built, and stripped): past `time.now`'s prologue its
/// rows follow the frame pointer, since it calls the vDSO on the system
/// stack; its first row (at entry) still the stack pointer.
#[test]
fn go_vdso_callers_walk_by_frame_pointer() {
    let dir = tempfile::tempdir().unwrap();
    let source = "package main\n\nimport \"time\"\n\nfunc main() { println(time.Now().Unix()) }\n";
    for (name, flags) in [("plain", "-ldflags="), ("stripped", "-ldflags=-s -w")] {
        let bin = crate::testing::go_build(dir.path(), source, name, &[flags]);
        let data = std::fs::read(&bin).unwrap();
        let built = build(&data).unwrap();
        let go = GoTable::from_data(data.as_slice()).unwrap().unwrap();
        let (entry, code) = go.function_code("time.now").expect("time.now");
        let end = entry + code.len() as u64;
        let base = built.table.base;
        let kinds: Vec<RowKind> = built
            .table
            .rows
            .iter()
            .filter(|r| (entry..end).contains(&(base + u64::from(r.pc))))
            .map(|r| RowKind::from_raw(r.kind))
            .collect();
        assert_eq!(kinds.first(), Some(&RowKind::Rsp), "{name}: {kinds:?}");
        assert!(kinds.contains(&RowKind::SwitchedStack), "{name}: {kinds:?}");
    }
}

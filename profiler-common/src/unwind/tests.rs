use super::*;

#[test]
fn the_mapping_search_covers_every_mapping() {
    assert!(MAX_MAPPINGS.is_power_of_two());
    assert!(1u64 << (MAPPING_SEARCH_STEPS - 1) >= MAX_MAPPINGS as u64);
}

#[test]
fn search_finds_the_last_row_at_or_below() {
    let pcs = [10u64, 20, 30, 40];
    let find = |pc| search((0, 4), pc, ROW_SEARCH_STEPS, |i| Some(pcs[i as usize]));
    assert_eq!(find(9), None);
    assert_eq!(find(10), Some(0));
    assert_eq!(find(19), Some(0));
    assert_eq!(find(20), Some(1));
    assert_eq!(find(1000), Some(3));
    assert_eq!(search((0, 0), 5, ROW_SEARCH_STEPS, |_| Some(0)), None);
    // A failed read ends the search.
    assert_eq!(search((0, 4), 25, ROW_SEARCH_STEPS, |_| None), None);
}

#[test]
fn search_is_exact_for_every_size_within_its_steps() {
    for len in 1..300u32 {
        let pcs: std::vec::Vec<u64> = (0..len).map(|i| u64::from(i) * 4).collect();
        for pc in 0..u64::from(len) * 4 + 8 {
            let want = pcs
                .iter()
                .rposition(|&p| p <= pc)
                .map(|i| u32::try_from(i).unwrap());
            assert_eq!(
                search((0, len), pc, MAPPING_SEARCH_STEPS, |i| Some(
                    pcs[i as usize]
                )),
                want,
                "len {len} pc {pc}"
            );
        }
    }
}

/// Rows at the PCs of `pcs`.
fn table(pcs: &[u32]) -> std::vec::Vec<UnwindRow> {
    pcs.iter()
        .map(|&pc| UnwindRow {
            pc,
            ..UnwindRow::default()
        })
        .collect()
}

/// The row of `rel` through the bucket index, as the kernel finds it.
fn bucketed(rows: &[UnwindRow], index: &[u32], shift: u32, rel: u32) -> Option<u32> {
    let len = u32::try_from(rows.len()).unwrap();
    let bucket = bucket_of(rel, shift, len);
    let range = bucket_rows(len, bucket, |b| index.get(b as usize).copied())?;
    search(range, u64::from(rel), ROW_SEARCH_STEPS, |i| {
        rows.get(i as usize).map(|r| u64::from(r.pc))
    })
}

#[test]
fn the_bucket_index_finds_the_row_the_whole_table_does() {
    // Dense, sparse and clustered tables (code is not uniform: a few
    // big functions, many small ones), of sizes around the bucket size.
    let mut seed = 0x2545_f491_u32;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed
    };
    for len in [1u32, 2, 15, 16, 17, 33, 200, 1000] {
        for spread in [1u32, 7, 64, 5000] {
            let mut pcs = std::vec![0u32];
            while pcs.len() < len as usize {
                let gap = if next() % 8 == 0 {
                    next() % (spread * 50)
                } else {
                    next() % spread
                };
                pcs.push(pcs[pcs.len() - 1] + 1 + gap);
            }
            let rows = table(&pcs);
            let shift = bucket_shift(&rows);
            let index: std::vec::Vec<u32> = bucket_entries(&rows, shift).collect();
            assert_eq!(index.len(), bucket_count(len) as usize);
            let end = pcs[pcs.len() - 1] + spread * 60;
            for rel in (0..end)
                .step_by(1 + (end / 3000) as usize)
                .chain([end, u32::MAX])
            {
                let whole = search((0, len), u64::from(rel), ROW_SEARCH_STEPS, |i| {
                    Some(u64::from(pcs[i as usize]))
                });
                assert_eq!(
                    bucketed(&rows, &index, shift, rel),
                    whole,
                    "len {len} spread {spread} rel {rel}"
                );
            }
        }
    }
}

#[test]
fn a_bucket_holds_few_rows() {
    // Evenly spread rows: each bucket's range is about ROWS_PER_BUCKET.
    let pcs: std::vec::Vec<u32> = (0..10_000).map(|i| i * 24).collect();
    let rows = table(&pcs);
    let shift = bucket_shift(&rows);
    let index: std::vec::Vec<u32> = bucket_entries(&rows, shift).collect();
    let widest = index.windows(2).map(|w| w[1] + 1 - w[0]).max().unwrap();
    assert!(
        widest <= 2 * ROWS_PER_BUCKET + 1,
        "widest bucket: {widest} rows"
    );
}

#[test]
fn an_index_that_does_not_fit_its_table_searches_it_all() {
    assert_eq!(
        bucket_rows(40, 1, |b| Some([0, 30, 20][b as usize])),
        Some((0, 40))
    );
    assert_eq!(bucket_rows(40, 0, |_| Some(50)), Some((0, 40)));
    assert_eq!(bucket_rows(40, 0, |_| None), None);
    assert_eq!(
        bucket_rows(40, 2, |_| Some(3)),
        Some((3, 40)),
        "the last bucket"
    );
}

#[test]
fn the_packed_table_keeps_rows_and_shift() {
    let m = UnwindMapping {
        table: UnwindMapping::pack_table(MAX_TABLE_ROWS, 31),
        ..UnwindMapping::default()
    };
    assert_eq!((m.rows(), m.bucket_shift()), (MAX_TABLE_ROWS, 31));
}

#[test]
fn steps() {
    let regs = Regs {
        pc: 0x1003,
        sp: 0x7000,
        bp: 0x7100,
    };
    assert_eq!(
        step(RowKind::Rsp, 8, 0, &regs),
        Step::Frame {
            cfa: 0x7008,
            ra_at: 0x7000,
            bp_at: None
        }
    );
    assert_eq!(
        step(RowKind::Rbp, 16, -2, &regs),
        Step::Frame {
            cfa: 0x7110,
            ra_at: 0x7108,
            bp_at: Some(0x7100)
        }
    );
    // A Go clock read on the system stack: its caller by rbp, as Rbp.
    assert_eq!(
        step(
            RowKind::from_raw(RowKind::SwitchedStack as u8),
            16,
            -2,
            &regs
        ),
        step(RowKind::Rbp, 16, -2, &regs)
    );
    assert_eq!(
        step(RowKind::FramePointer, 0, 0, &regs),
        Step::Frame {
            cfa: 0x7110,
            ra_at: 0x7108,
            bp_at: Some(0x7100)
        }
    );
    // PLT: pc & 15 = 3 < 11, nothing pushed yet; at 11 and after, 8 more.
    assert_eq!(
        step(RowKind::Plt, 11, 0, &regs),
        Step::Frame {
            cfa: 0x7008,
            ra_at: 0x7000,
            bp_at: None
        }
    );
    let later = Regs { pc: 0x100b, ..regs };
    assert_eq!(
        step(RowKind::Plt, 11, 0, &later),
        Step::Frame {
            cfa: 0x7010,
            ra_at: 0x7008,
            bp_at: None
        }
    );
    assert_eq!(
        step(RowKind::Signal, 0, 0, &regs),
        Step::Signal {
            pc_at: 0x7000 + 168,
            sp_at: 0x7000 + 160,
            bp_at: 0x7000 + 120
        }
    );
    assert_eq!(step(RowKind::End, 0, 0, &regs), Step::End);
    for raw in 0..8u8 {
        let kind = RowKind::from_raw(raw);
        assert!(raw > 5 || kind as u8 == raw);
    }
}

/// The kernel's walk keeps the search's range in its `WalkState` (volatile
/// accesses to map memory): the same search, with the same answers, and
/// the range left where the search ended.
#[test]
fn the_kernels_search_in_its_walk_state_is_the_same_search() {
    let mut state = WalkState {
        pc: 0,
        sp: 0,
        bp: 0,
        mapping: UnwindMapping::default(),
        pid: 0,
        exact_pc: 0,
        lo: u32::MAX,
        hi: 0,
        len: 0,
        truncated: 0,
        by_table: 0,
        by_frame_pointer: 0,
        without_table: 0,
        by_file: 0,
        ask_mappings: 0,
        phase: 0,
        python: crate::python::PythonWalk::default(),
        java: crate::java::JavaWalk::default(),
        maple: by_file::MapleWalk::default(),
    };
    for len in 0..300u32 {
        let pcs: std::vec::Vec<u64> = (0..len).map(|i| u64::from(i) * 4 + 100).collect();
        for pc in 90..u64::from(len) * 4 + 110 {
            let pc_at = |i: u32| Some(pcs[i as usize]);
            let local = search((0, len), pc, MAPPING_SEARCH_STEPS, pc_at);
            let kernel = search_in(&mut state, (0, len), pc, MAPPING_SEARCH_STEPS, pc_at);
            assert_eq!(kernel, local, "len {len} pc {pc}");
            assert_eq!(state.lo, state.hi, "the search ran to its end");
            assert_eq!(found(state.lo), local);
        }
    }
    // A failed read ends it in the kernel too.
    assert_eq!(
        search_in(&mut state, (0, 4), 25, ROW_SEARCH_STEPS, |_| None),
        None
    );
}

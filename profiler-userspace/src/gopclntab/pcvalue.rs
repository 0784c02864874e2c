//! Go's pc-value tables: a run of (value delta, pc delta) pairs, each a
//! varint, the value delta zig-zag encoded, the pc delta in units of the
//! instruction quantum. The value starts at -1 at the function's entry.

/// Reads one unsigned LEB128 varint at `*pos`.
fn varint(data: &[u8], pos: &mut usize) -> Option<u32> {
    let mut value: u32 = 0;
    let mut shift = 0;
    loop {
        let byte = *data.get(*pos)?;
        *pos += 1;
        value |= u32::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(value);
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
}

/// Walks the table at `table` (a slice from its start) from `entry`;
/// calls `each(start, end, value)` for every range until it returns
/// `false` or the table ends. `None` when the table is corrupt.
pub fn walk(
    table: &[u8],
    entry: u64,
    quantum: u32,
    mut each: impl FnMut(u64, u64, i32) -> bool,
) -> Option<()> {
    let (mut pos, mut pc, mut value) = (0, entry, -1i32);
    let mut first = true;
    loop {
        let raw = varint(table, &mut pos)?;
        if raw == 0 && !first {
            return Some(());
        }
        first = false;
        let delta = if raw & 1 == 0 {
            (raw >> 1).cast_signed()
        } else {
            !(raw >> 1).cast_signed()
        };
        value = value.wrapping_add(delta);
        let step = u64::from(varint(table, &mut pos)?) * u64::from(quantum);
        if step == 0 {
            return None;
        }
        let end = pc + step;
        if !each(pc, end, value) {
            return Some(());
        }
        pc = end;
    }
}

/// The value of the table at `pc`; `None` when `pc` is past its end or
/// the table is corrupt.
pub fn at(table: &[u8], entry: u64, quantum: u32, pc: u64) -> Option<i32> {
    let mut found = None;
    walk(table, entry, quantum, |start, end, value| {
        if (start..end).contains(&pc) {
            found = Some(value);
            return false;
        }
        pc >= end
    })?;
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_ranges_decode_as_go_writes_them() {
        // From -1: +2 (to 1) over 4 bytes, +8 (to 9) over 3, -2 (to 7) over 2.
        let table = [0x04, 0x04, 0x10, 0x03, 0x03, 0x02, 0x00];
        let mut ranges = Vec::new();
        walk(&table, 0x100, 1, |s, e, v| {
            ranges.push((s, e, v));
            true
        })
        .unwrap();
        assert_eq!(
            ranges,
            [(0x100, 0x104, 1), (0x104, 0x107, 9), (0x107, 0x109, 7)]
        );
        assert_eq!(at(&table, 0x100, 1, 0x105), Some(9));
        assert_eq!(at(&table, 0x100, 1, 0x109), None);
        // A table cut short is corrupt, not a value.
        assert_eq!(at(&table[..3], 0x100, 1, 0x106), None);
        assert_eq!(at(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01], 0, 1, 0), None);
    }
}

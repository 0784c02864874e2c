//! A code object's line for an instruction, from its line table: the
//! three formats CPython has used since 3.8 (`Objects/lnotab_notes.txt`
//! and `Objects/locations.md` in its sources).
use super::layout::LineTable;

/// The line of instruction `instr` (as [`LineTable`] says it is counted)
/// in a code object whose first line is `first` and whose table is
/// `table`; `None` where the table gives no line.
#[must_use]
pub fn line_of(kind: LineTable, table: &[u8], first: u32, instr: u64) -> Option<u32> {
    let line = match kind {
        LineTable::Lnotab => Some(lnotab(table, i64::from(first), instr)),
        LineTable::Lines310 => lines_310(table, i64::from(first), instr.checked_mul(2)?),
        LineTable::Locations => locations(table, i64::from(first), instr),
    }?;
    u32::try_from(line).ok()
}

/// 3.8, 3.9: pairs of (byte offset increment, signed line increment);
/// `lasti` is a byte offset.
fn lnotab(table: &[u8], first: i64, lasti: u64) -> i64 {
    let (mut line, mut addr) = (first, 0u64);
    for pair in table.chunks_exact(2) {
        addr += u64::from(pair[0]);
        if addr > lasti {
            break;
        }
        line += i64::from(pair[1].cast_signed());
    }
    line
}

/// 3.10: pairs of (byte length of a range, signed line increment, -128
/// for a range with no line); `addr` is a byte offset.
fn lines_310(table: &[u8], first: i64, addr: u64) -> Option<i64> {
    let (mut line, mut end) = (first, 0u64);
    for pair in table.chunks_exact(2) {
        let start = end;
        end += u64::from(pair[0]);
        let delta = pair[1].cast_signed();
        let this = if delta == -128 {
            None
        } else {
            line += i64::from(delta);
            Some(line)
        };
        if start <= addr && addr < end {
            return this;
        }
    }
    None
}

/// 3.11 and later: entries of a header byte (bit 7 set; a code in bits 3
/// to 6; the length in code units less one in bits 0 to 2) and the code's
/// data; `instr` is in code units.
fn locations(table: &[u8], first: i64, instr: u64) -> Option<i64> {
    let mut bytes = table.iter().copied().peekable();
    let (mut line, mut addr) = (first, 0u64);
    while let Some(header) = bytes.next() {
        if header & 0x80 == 0 {
            return None;
        }
        let code = (header >> 3) & 15;
        let length = u64::from(header & 7) + 1;
        let delta = match code {
            15 => None,
            14 => {
                let delta = signed_varint(&mut bytes)?;
                for _ in 0..3 {
                    varint(&mut bytes)?;
                }
                Some(delta)
            }
            13 => Some(signed_varint(&mut bytes)?),
            10..=12 => {
                bytes.next()?;
                bytes.next()?;
                Some(i64::from(code) - 10)
            }
            _ => {
                bytes.next()?;
                Some(0)
            }
        };
        if let Some(delta) = delta {
            line += delta;
        }
        if addr <= instr && instr < addr + length {
            return delta.map(|_| line);
        }
        addr += length;
        // Continuation bytes never have bit 7 set: the next header does.
        while bytes.peek().is_some_and(|b| b & 0x80 == 0) {
            bytes.next();
        }
    }
    None
}

/// A varint of 6-bit chunks, least significant first, bit 6 set on every
/// chunk but the last.
fn varint(bytes: &mut impl Iterator<Item = u8>) -> Option<u64> {
    let mut byte = bytes.next()?;
    let mut value = u64::from(byte & 63);
    let mut shift = 6;
    while byte & 64 != 0 {
        byte = bytes.next()?;
        value |= u64::from(byte & 63).checked_shl(shift)?;
        shift += 6;
    }
    Some(value)
}

/// A varint whose lowest bit is the sign.
fn signed_varint(bytes: &mut impl Iterator<Item = u8>) -> Option<i64> {
    let value = varint(bytes)?;
    let magnitude = i64::try_from(value >> 1).ok()?;
    Some(if value & 1 == 0 {
        magnitude
    } else {
        -magnitude
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lnotab_adds_line_increments_up_to_the_instruction() {
        // Line 10 at bytes 0..6, 11 at 6..10, 13 from 10.
        let table = [6, 1, 4, 2];
        assert_eq!(line_of(LineTable::Lnotab, &table, 10, 0), Some(10));
        assert_eq!(line_of(LineTable::Lnotab, &table, 10, 8), Some(11));
        assert_eq!(line_of(LineTable::Lnotab, &table, 10, 12), Some(13));
    }

    #[test]
    fn lines_310_ranges_count_bytes_and_may_have_no_line() {
        // Bytes 0..4 line 5 (+0), 4..8 no line, 8..12 line 7 (+2).
        let table = [4, 0, 4, 0x80, 4, 2];
        let line = |instr| line_of(LineTable::Lines310, &table, 5, instr);
        assert_eq!(line(1), Some(5));
        assert_eq!(line(2), None);
        assert_eq!(line(5), Some(7));
    }

    #[test]
    fn location_entries_of_every_form() {
        let table = [
            // Short form (code 0), 2 units, same line: 1 data byte.
            0x80 | 1,
            0x05,
            // One-line form (code 11: +1), 1 unit: 2 data bytes.
            0x80 | (11 << 3),
            0x01,
            0x02,
            // No column (code 13), 1 unit, line -1: svarint 3.
            0x80 | (13 << 3),
            0x03,
            // No location (code 15), 1 unit.
            0x80 | (15 << 3),
            // Long form (code 14), 1 unit, line +40: svarint 80 (0x50) in
            // two chunks, then three varints.
            0x80 | (14 << 3),
            0x40 | (0x50 & 0x3f),
            0x50 >> 6,
            0,
            1,
            2,
        ];
        let line = |instr| line_of(LineTable::Locations, &table, 20, instr);
        assert_eq!(line(0), Some(20));
        assert_eq!(line(1), Some(20));
        assert_eq!(line(2), Some(21));
        assert_eq!(line(3), Some(20));
        assert_eq!(line(4), None);
        assert_eq!(line(5), Some(60));
        assert_eq!(line(6), None);
    }
}

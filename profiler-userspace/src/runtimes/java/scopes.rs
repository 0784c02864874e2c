//! What a compiled method's debug information says of a PC: the methods
//! inlined there, innermost first, each with its bytecode index; and a
//! method's line for a bytecode index. Pure decoding of the bytes the
//! JVM keeps (`debugInfo.cpp`, `pcDesc.cpp`, `compressedStream.cpp`).
//!
//! - An `nmethod`'s `PcDesc`s map PC offsets to scope offsets in its
//!   scopes data; a scope is (sender scope's offset, method as an index
//!   into the `nmethod`'s metadata, bytecode index plus one), read as
//!   UNSIGNED5 integers. From JDK 20 the encoding excludes the byte 0
//!   (every byte is stored plus one: [`Encoding::excluded`]).
//! - A method's line number table follows its bytecodes: a pair per
//!   byte (bytecode index delta in the top five bits, line delta in the
//!   low three) or, after an escape byte, two signed UNSIGNED5 integers.

/// UNSIGNED5's bytes below this end an integer (`L` in HotSpot).
const UNSIGNED5_L: u32 = 192;
/// Bits each continuation byte adds (`lg_H`).
const UNSIGNED5_LG_H: u32 = 6;
/// The most bytes an integer takes.
const UNSIGNED5_MAX: usize = 5;

/// The deepest inlining followed (HotSpot's `MaxInlineLevel` is 15).
const MAX_SCOPES: usize = 64;

/// `DebugInformationRecorder::serialized_null`: no sender scope.
const NO_SCOPE: u32 = 0;

/// How a JVM writes UNSIGNED5 integers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Encoding {
    /// Byte values below this are not used (0 before JDK 20, 1 from it);
    /// every byte is stored this much above its value.
    pub excluded: u8,
}

/// A reader of UNSIGNED5 integers from `bytes`, from `at`.
struct Stream<'a> {
    bytes: &'a [u8],
    at: usize,
    encoding: Encoding,
}

impl Stream<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    /// The next byte as stored, and its value.
    fn digit(&mut self) -> Option<(u32, u32)> {
        let stored = self.byte()?;
        let value = stored.checked_sub(self.encoding.excluded)?;
        Some((u32::from(stored), u32::from(value)))
    }

    fn uint(&mut self) -> Option<u32> {
        let (stored, mut sum) = self.digit()?;
        if stored < UNSIGNED5_L {
            return Some(sum);
        }
        let mut shift = UNSIGNED5_LG_H;
        for i in 1..UNSIGNED5_MAX {
            let (stored, value) = self.digit()?;
            sum = sum.wrapping_add(value.wrapping_shl(shift));
            if stored < UNSIGNED5_L || i == UNSIGNED5_MAX - 1 {
                return Some(sum);
            }
            shift += UNSIGNED5_LG_H;
        }
        Some(sum)
    }

    /// A signed integer, zig-zag encoded.
    fn int(&mut self) -> Option<i32> {
        let v = self.uint()?;
        Some((v >> 1).cast_signed() ^ -((v & 1).cast_signed()))
    }
}

/// One `PcDesc`: a PC offset from the code's start and its scope's offset
/// in the scopes data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcDesc {
    pub pc_offset: i32,
    pub scope: u32,
}

/// The `PcDesc` of the instruction at `instruction` (an offset from the
/// code's start): the first recorded after it, as HotSpot records a
/// `PcDesc` at the end of the code it describes (a call's at its return
/// address) and JFR takes `pc_desc_near(pc + 1)` for a sampled PC.
/// `descs` are in PC order.
#[must_use]
pub fn pc_desc_for(descs: &[PcDesc], instruction: u32) -> Option<PcDesc> {
    let at = i64::from(instruction);
    let i = descs.partition_point(|d| i64::from(d.pc_offset) <= at);
    descs.get(i).copied()
}

/// The scopes at `scope` in `scopes` (the scopes data), innermost first:
/// each (metadata index of its method, bytecode index, `-1` at a method's
/// entry).
#[must_use]
pub fn scope_chain(scopes: &[u8], scope: u32, encoding: Encoding) -> Vec<(u32, i32)> {
    let mut chain = Vec::new();
    let mut at = scope;
    while at != NO_SCOPE && chain.len() < MAX_SCOPES {
        let mut stream = Stream {
            bytes: scopes,
            at: at as usize,
            encoding,
        };
        let (Some(sender), Some(method), Some(bci)) = (stream.uint(), stream.uint(), stream.uint())
        else {
            break;
        };
        // `read_bci`: stored plus one (`InvocationEntryBci` is -1).
        chain.push((method, bci.cast_signed().wrapping_sub(1)));
        if sender >= at {
            break;
        }
        at = sender;
    }
    chain
}

/// The line of bytecode index `bci` in the line number table `table`: the
/// entry at `bci`, else the last before it; `None` for an empty table.
#[must_use]
pub fn line_of(table: &[u8], bci: i32, encoding: Encoding) -> Option<u32> {
    let mut stream = Stream {
        bytes: table,
        at: 0,
        encoding,
    };
    let (mut at_bci, mut line) = (0i32, 0i32);
    let mut best: Option<(i32, i32)> = None;
    loop {
        let next = stream.byte()?;
        if next == 0 {
            break;
        }
        if next == 0xff {
            at_bci = at_bci.wrapping_add(stream.int()?);
            line = line.wrapping_add(stream.int()?);
        } else {
            at_bci += i32::from(next >> 3);
            line += i32::from(next & 7);
        }
        if at_bci == bci {
            return u32::try_from(line).ok();
        }
        if at_bci < bci && best.is_none_or(|(b, _)| at_bci >= b) {
            best = Some((at_bci, line));
        }
    }
    best.and_then(|(_, l)| u32::try_from(l).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: Encoding = Encoding { excluded: 0 };
    const NEW: Encoding = Encoding { excluded: 1 };

    /// Encodes `v` as UNSIGNED5, as HotSpot's writer does (JDK 17's
    /// `write_int_mb`; JDK 21's `UNSIGNED5::write_uint`, with `X` bytes
    /// excluded).
    fn encode(v: u32, encoding: Encoding, out: &mut Vec<u8>) {
        let x = u32::from(encoding.excluded);
        let l = UNSIGNED5_L - x;
        let mut v = v;
        for _ in 0..UNSIGNED5_MAX - 1 {
            if v < l {
                out.push(u8::try_from(v + x).unwrap());
                return;
            }
            v -= l;
            out.push(u8::try_from(UNSIGNED5_L + v % 64).unwrap());
            v >>= UNSIGNED5_LG_H;
        }
        out.push(u8::try_from(v + x).unwrap());
    }

    fn uint(v: u32, out: &mut Vec<u8>) {
        encode(v, OLD, out);
    }

    #[test]
    fn unsigned5_reads_what_hotspots_writers_write() {
        for encoding in [OLD, NEW] {
            for v in [
                0,
                1,
                190,
                191,
                192,
                193,
                255,
                12_345,
                1 << 20,
                u32::MAX >> 1,
            ] {
                let mut bytes = Vec::new();
                encode(v, encoding, &mut bytes);
                assert!(encoding == OLD || !bytes.contains(&0), "{bytes:?}");
                let mut s = Stream {
                    bytes: &bytes,
                    at: 0,
                    encoding,
                };
                assert_eq!(s.uint(), Some(v), "{v} {encoding:?}: {bytes:?}");
                assert_eq!(s.at, bytes.len());
            }
        }
    }

    #[test]
    fn a_chain_of_inlined_scopes_reads_innermost_first() {
        // Offset 0 is the null scope; the outer scope at 1, the inner one
        // (its sender is the outer) after it.
        let mut scopes = vec![0u8];
        let outer = u32::try_from(scopes.len()).unwrap();
        for v in [0, 3, 17 + 1] {
            uint(v, &mut scopes);
        }
        let inner = u32::try_from(scopes.len()).unwrap();
        for v in [outer, 5, 250 + 1] {
            uint(v, &mut scopes);
        }
        assert_eq!(scope_chain(&scopes, inner, OLD), [(5, 250), (3, 17)]);
        assert_eq!(scope_chain(&scopes, outer, OLD), [(3, 17)]);
        assert!(scope_chain(&scopes, 0, OLD).is_empty());
    }

    #[test]
    fn an_instruction_takes_the_first_desc_after_it() {
        let descs = [
            PcDesc {
                pc_offset: -1,
                scope: 0,
            },
            PcDesc {
                pc_offset: 0x20,
                scope: 7,
            },
            PcDesc {
                pc_offset: 0x48,
                scope: 9,
            },
        ];
        // A call whose return address is 0x20, and the instruction there.
        assert_eq!(pc_desc_for(&descs, 0x1f), Some(descs[1]));
        assert_eq!(pc_desc_for(&descs, 0x20), Some(descs[2]));
        assert_eq!(pc_desc_for(&descs, 0x30), Some(descs[2]));
        assert_eq!(pc_desc_for(&descs, 0x48), None);
    }

    #[test]
    fn lines_come_from_short_pairs_and_escaped_ones() {
        // bci 0 line 10 (escaped), bci 4 line 12, bci 9 line 13, then bci
        // 300 line 5 (escaped, a negative line delta).
        let mut table = vec![0xff];
        uint(0, &mut table);
        uint(20, &mut table);
        table.push(4 << 3 | 2);
        table.push(5 << 3 | 1);
        table.push(0xff);
        uint(291 * 2, &mut table);
        uint(8 * 2 - 1, &mut table);
        table.push(0);
        assert_eq!(line_of(&table, 0, OLD), Some(10));
        assert_eq!(line_of(&table, 4, OLD), Some(12));
        assert_eq!(line_of(&table, 7, OLD), Some(12));
        assert_eq!(line_of(&table, 9, OLD), Some(13));
        assert_eq!(line_of(&table, 300, OLD), Some(5));
        assert_eq!(line_of(&[0], 3, OLD), None);
    }
}

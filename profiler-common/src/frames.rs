//! The entries of a recorded user stack: native PCs, and the frames of
//! runtimes the kernel walk reads (Python, Java), each two entries tagged
//! in the first entry's top bits (user addresses stay below 2^47).
//!
//! - Python ([`PYTHON_FRAME`], `crate::python`): the code object, then
//!   its instruction and first line.
//! - Java ([`JAVA_FRAME`], `crate::java`): a compiled method's `nmethod`
//!   and the PC's offset in its code with the compilation's id, or an
//!   interpreted method's `Method*` ([`JAVA_INTERPRETED`] set) and its
//!   bytecode index with a check of its `ConstMethod*`.
//!
//! The daemon decodes them with [`user_frames`] and names them from what
//! it read of each runtime.

/// The two tag bits of a runtime frame's first entry.
pub const TAG_MASK: u64 = 0b11 << 62;

/// Marks the first entry of a Python frame.
pub const PYTHON_FRAME: u64 = 0b10 << 62;

/// One entry: the walk's Python frames end here because the next frame
/// could not be read (the chain changed under the walk, or memory was
/// unreadable). Shown as `[truncated]` below the frames read.
pub const PYTHON_TORN: u64 = PYTHON_FRAME | 1;

/// Marks the first entry of a Java frame.
pub const JAVA_FRAME: u64 = 0b11 << 62;

/// With [`JAVA_FRAME`]: an interpreted frame (a `Method*` follows), not a
/// compiled one (an `nmethod*`).
pub const JAVA_INTERPRETED: u64 = 1 << 61;

/// The pointer bits of a runtime frame's first entry.
const POINTER_MASK: u64 = (1 << 61) - 1;

/// The second entry of a Python frame: its instruction (see
/// `KernelLayout::frame_instr`) and its code object's first line.
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
#[must_use]
pub const fn python_detail(instr: u32, first_line: u32) -> u64 {
    (first_line as u64) << 32 | instr as u64
}

/// The second entry of a Java frame: a compiled frame's PC offset from its
/// code's start and the compilation's id; an interpreted frame's bytecode
/// index and its `ConstMethod*` shifted right by 3 (truncated).
#[inline(always)]
#[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
#[must_use]
pub const fn java_detail(offset: u32, check: u32) -> u64 {
    (check as u64) << 32 | offset as u64
}

/// A user stack entry as the daemon reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UserFrame {
    /// A native PC (leaf) or return address.
    Native(u64),
    /// A Python frame: its code object, its instruction as recorded (a
    /// byte offset from the code object's start for 3.11 and later, the
    /// frame's `f_lasti` before) and the code object's first line then.
    Python {
        code: u64,
        instr: u32,
        first_line: u32,
    },
    /// Python frames that could not be read on (see [`PYTHON_TORN`]).
    PythonTorn,
    /// A frame of JIT-compiled Java code: the `nmethod`, the offset from
    /// its code's start of the instruction the frame is in (the PC at the
    /// walk's first frame, a caller's return address less one), and its
    /// compilation's id, which tells it from a later `nmethod` at the same
    /// address.
    JavaCompiled {
        nmethod: u64,
        pc_offset: u32,
        compile_id: u32,
    },
    /// An interpreted Java frame: the `Method*`, the bytecode index
    /// (`u32::MAX`: unknown) and its `ConstMethod*` shifted right by 3.
    JavaInterpreted {
        method: u64,
        bci: u32,
        const_method: u32,
    },
}

/// The frames of a recorded user stack, leaf first: a runtime frame's two
/// entries become one frame (a lone first entry at the end is dropped).
pub fn user_frames(ips: &[u64]) -> impl Iterator<Item = UserFrame> + '_ {
    let mut i = 0;
    core::iter::from_fn(move || {
        let ip = *ips.get(i)?;
        i += 1;
        if ip == PYTHON_TORN {
            return Some(UserFrame::PythonTorn);
        }
        let tag = ip & TAG_MASK;
        if tag != PYTHON_FRAME && tag != JAVA_FRAME {
            return Some(UserFrame::Native(ip));
        }
        let detail = *ips.get(i)?;
        i += 1;
        #[expect(clippy::cast_possible_truncation, reason = "two u32 halves")]
        let (low, high) = (detail as u32, (detail >> 32) as u32);
        let pointer = ip & POINTER_MASK;
        Some(if tag == PYTHON_FRAME {
            UserFrame::Python {
                code: pointer,
                instr: low,
                first_line: high,
            }
        } else if ip & JAVA_INTERPRETED != 0 {
            UserFrame::JavaInterpreted {
                method: pointer,
                bci: low,
                const_method: high,
            }
        } else {
            UserFrame::JavaCompiled {
                nmethod: pointer,
                pc_offset: low,
                compile_id: high,
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn runtime_frames_take_two_entries_and_native_ones_one() {
        let code = 0x7f00_1234_5670;
        let ips = [
            0x40_1000,
            PYTHON_FRAME | code,
            python_detail(44, 12),
            0x40_2000,
            JAVA_FRAME | 0x7f00_2000_0000,
            java_detail(0x84, 77),
            JAVA_FRAME | JAVA_INTERPRETED | 0x7f00_3000_0008,
            java_detail(12, 0x0fe0_0001),
            PYTHON_TORN,
        ];
        let frames: Vec<_> = user_frames(&ips).collect();
        assert_eq!(
            frames,
            [
                UserFrame::Native(0x40_1000),
                UserFrame::Python {
                    code,
                    instr: 44,
                    first_line: 12
                },
                UserFrame::Native(0x40_2000),
                UserFrame::JavaCompiled {
                    nmethod: 0x7f00_2000_0000,
                    pc_offset: 0x84,
                    compile_id: 77
                },
                UserFrame::JavaInterpreted {
                    method: 0x7f00_3000_0008,
                    bci: 12,
                    const_method: 0x0fe0_0001
                },
                UserFrame::PythonTorn,
            ]
        );
    }

    #[test]
    fn a_runtime_frame_cut_after_its_first_entry_is_dropped() {
        let ips = [0x40_1000, PYTHON_FRAME | 0x7f00_0000_0010];
        let frames: Vec<_> = user_frames(&ips).collect();
        assert_eq!(frames, [UserFrame::Native(0x40_1000)]);
        let ips = [0x40_1000, JAVA_FRAME | 0x7f00_0000_0010];
        let frames: Vec<_> = user_frames(&ips).collect();
        assert_eq!(frames, [UserFrame::Native(0x40_1000)]);
    }
}

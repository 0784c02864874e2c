//! A binary's table found through the file a PC's mapping maps, for a
//! process whose own mappings are not published yet: its first samples.
//! The kernel asks for a new process's mappings at its first sample, and
//! the daemon publishes them a few milliseconds later, so without this the
//! first sample of every process (of a build, a shell loop, a container's
//! short job) was walked by frame pointer alone.
//!
//! The daemon publishes, in [`crate::maps::UNWIND_FILES`], each file whose
//! table is in the row array, keyed as the kernel reads it from a mapping
//! ([`FileKey`]), with where the table is and how a mapping of it is placed
//! ([`FileTable`]). The kernel finds the PC's mapping in the process's tree
//! of mappings ([`maple`]) and reads its file's identity, at the
//! [`FileOffsets`] the daemon found in the kernel's BTF.
//!
//! Not with `bpf_find_vma`: it takes the process's mmap lock, and a program
//! run with interrupts off (a sample, a switch) may take it once, since it
//! is released from an interrupt work that runs after the program. A stack
//! through a program and its libc needs two mappings, and the tree is read
//! as the kernel's own lockless lookups read it (each node as RCU keeps it,
//! the mapping found checked to hold the PC).
use super::UnwindMapping;

/// A mapped file as the kernel identifies it from a mapping: its inode
/// number, size and modification time (a file rewritten in place, or a
/// new file given a freed inode number, differs in one of them), and the
/// file offset the mapping starts at.
///
/// Not its device: a file in a container's overlay is mapped as the layer's
/// own file, which the kernel reads, while `/proc` shows the overlay's
/// device, a new one at each mount (the inode number, size and time are
/// the layer file's in both when the layers share a file system; with
/// `xino` they do not, and nothing matches). Two files alike in all four
/// on different file systems are copies of one binary, with one table.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FileKey {
    pub ino: u64,
    pub size: u64,
    /// Seconds of its modification time.
    pub mtime: i64,
    /// The file offset of the mapping's first byte (`vm_pgoff` in bytes).
    pub offset: u64,
}

/// Where a file's table is, and how a mapping of it at [`FileKey::offset`]
/// is placed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileTable {
    /// [`UnwindMapping::first_row`].
    pub first_row: u32,
    /// [`UnwindMapping::table`].
    pub table: u32,
    /// The mapping's [`UnwindMapping::bias`] less its start address.
    pub bias_from_start: u64,
    /// Non-zero once every runtime the daemon reads (Python, a JVM, Go's
    /// labels, a thread context) has read the file and found none of its
    /// own: a new process walked by this file's table may wait to be read
    /// (`ProcessSeen::deferrable`). A runtime's file never is: its
    /// processes are read at once, for their frames from the first.
    pub may_wait: u32,
    pub reserved: u32,
}

impl FileTable {
    /// The table for `bias` of a mapping that starts at `start`.
    #[must_use]
    pub const fn new(first_row: u32, table: u32, start: u64, bias: u64) -> Self {
        Self {
            first_row,
            table,
            bias_from_start: bias.wrapping_sub(start),
            may_wait: 0,
            reserved: 0,
        }
    }

    /// The mapping `[start, end)` of the file, walked by this table.
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    #[must_use]
    pub const fn mapping(&self, start: u64, end: u64) -> UnwindMapping {
        UnwindMapping {
            start,
            end,
            bias: start.wrapping_add(self.bias_from_start),
            first_row: self.first_row,
            table: self.table,
        }
    }
}

/// Byte offsets of the fields a mapping's file is identified by, resolved
/// from `/sys/kernel/btf/vmlinux`; all zero when unknown (nothing is read,
/// and a process's first samples are walked by frame pointer).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileOffsets {
    /// `vm_area_struct.vm_start`.
    pub vm_start: u32,
    /// `vm_area_struct.vm_end`.
    pub vm_end: u32,
    /// `vm_area_struct.vm_pgoff`.
    pub vm_pgoff: u32,
    /// `vm_area_struct.vm_file`.
    pub vm_file: u32,
    /// `file.f_inode`.
    pub f_inode: u32,
    /// `inode.i_ino`.
    pub i_ino: u32,
    /// `inode.i_size`.
    pub i_size: u32,
    /// The seconds of `inode`'s modification time (`i_mtime_sec` since
    /// Linux 6.11, `i_mtime.tv_sec` before).
    pub i_mtime_sec: u32,
    /// `task_struct.mm`.
    pub task_mm: u32,
    /// `mm_struct.mm_mt.ma_root`: the root of the process's mappings.
    pub mm_root: u32,
}

impl FileOffsets {
    /// Whether the offsets were resolved.
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    #[must_use]
    pub const fn known(&self) -> bool {
        self.vm_file != 0 && self.f_inode != 0 && self.mm_root != 0
    }
}

/// The kernel's maple tree (`include/linux/maple_tree.h`, 64-bit: Linux 6.1
/// on), which holds a process's mappings by address; the daemon checks the
/// node layout against the kernel's BTF before it sets [`FileOffsets`].
pub mod maple {
    /// The low bits of an entry that points at a node (its type, and that
    /// it is a node).
    pub const NODE_MASK: u64 = 0xff;
    /// `maple_leaf_64`: a leaf; its slots are the mappings.
    pub const LEAF_64: u64 = 1;
    /// `maple_range_64`: an inner node of 15 pivots and 16 slots.
    pub const RANGE_64: u64 = 2;
    /// `maple_arange_64`: an inner node of 9 pivots and 10 slots (the tree
    /// of mappings tracks gaps).
    pub const ARANGE_64: u64 = 3;
    /// Where a node's pivots start (after its parent pointer).
    pub const PIVOTS_AT: u32 = 8;
    /// The pivots of a leaf or range node, and where its slots start.
    pub const RANGE_64_PIVOTS: u32 = 15;
    pub const RANGE_64_SLOTS_AT: u32 = PIVOTS_AT + 8 * RANGE_64_PIVOTS;
    /// The same for a node that tracks gaps.
    pub const ARANGE_64_PIVOTS: u32 = 9;
    pub const ARANGE_64_SLOTS_AT: u32 = PIVOTS_AT + 8 * ARANGE_64_PIVOTS;
    /// Levels descended at most (a tree of mappings three levels deep holds
    /// about 1,600 of them, eight levels far more than a process has).
    pub const MAX_HEIGHT: u32 = 8;

    /// Whether the root entry `entry` points at a node (`xa_is_node`: a
    /// tree of more than one entry). The entries below, in the slots of
    /// inner nodes, point at nodes without that tag.
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    #[must_use]
    pub const fn is_node(entry: u64) -> bool {
        entry & 3 == 2 && entry > 4096
    }

    /// The type of the node `entry` points at.
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    #[must_use]
    pub const fn node_type(entry: u64) -> u64 {
        (entry >> 3) & 0xf
    }

    /// The pivots of a node of type `ty` and where its slots are; `None`
    /// for a type the tree of mappings does not use.
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    #[must_use]
    pub const fn layout(ty: u64) -> Option<(u32, u32)> {
        match ty {
            LEAF_64 | RANGE_64 => Some((RANGE_64_PIVOTS, RANGE_64_SLOTS_AT)),
            ARANGE_64 => Some((ARANGE_64_PIVOTS, ARANGE_64_SLOTS_AT)),
            _ => None,
        }
    }

    /// The slot of a node whose first `count` pivots are `pivots` that
    /// holds `index`: the first whose pivot (its last index) is at or past
    /// it, else the last (up to the node's end), as `mtree_lookup_walk`
    /// reads it.
    #[inline(always)]
    #[allow(clippy::inline_always, reason = "runs inside an eBPF program")]
    #[must_use]
    pub fn slot_of(pivots: &[u64; RANGE_64_PIVOTS as usize], count: u32, index: u64) -> u32 {
        let mut slot = count;
        for (i, &pivot) in (0..count).zip(pivots.iter()) {
            if pivot >= index {
                slot = i;
                break;
            }
        }
        slot
    }
}

/// The descent of the tree of mappings under way: the entry reached, the
/// address looked for, and the pivots of the node being read (in the walk's
/// per-CPU state: a loop callback sees only what a map holds).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MapleWalk {
    pub entry: u64,
    pub index: u64,
    /// Non-zero once `entry` is a leaf's slot (a mapping, or none).
    pub leaf: u64,
    pub pivots: [u64; maple::RANGE_64_PIVOTS as usize],
}

#[cfg(feature = "user")]
mod pod {
    use super::{FileKey, FileOffsets, FileTable};

    // SAFETY: repr(C): four 8-byte integers, no padding, every bit pattern
    // valid.
    unsafe impl aya::Pod for FileKey {}
    // SAFETY: repr(C): two u32, a u64 and two u32, no padding, every bit
    // pattern valid.
    unsafe impl aya::Pod for FileTable {}
    // SAFETY: ten u32s, no padding, every bit pattern valid.
    unsafe impl aya::Pod for FileOffsets {}
}

const _: () = assert!(size_of::<FileKey>() == 32);
const _: () = assert!(size_of::<FileTable>() == 24);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_table_places_each_mapping_of_the_file_as_its_first() {
        // Published from a mapping at 0x5555_0000 whose bias was 0x5554_f000.
        let table = FileTable::new(7, 99, 0x5555_0000, 0x5554_f000);
        let mapping = table.mapping(0x7f00_0000, 0x7f00_8000);
        assert_eq!(mapping.bias, 0x7eff_f000);
        assert_eq!((mapping.first_row, mapping.table), (7, 99));
        assert_eq!((mapping.start, mapping.end), (0x7f00_0000, 0x7f00_8000));
        // A bias above the start (a table based past the mapping) wraps back.
        let above = FileTable::new(0, 1, 0x1000, 0x3000);
        assert_eq!(above.mapping(0x9000, 0xa000).bias, 0xb000);
    }

    #[test]
    fn a_node_slot_is_the_first_whose_pivot_reaches_the_index() {
        let mut pivots = [0; 15];
        pivots[..3].copy_from_slice(&[0x0fff, 0x1fff, 0x2fff]);
        assert_eq!(maple::slot_of(&pivots, 15, 0), 0);
        assert_eq!(maple::slot_of(&pivots, 15, 0x0fff), 0);
        assert_eq!(maple::slot_of(&pivots, 15, 0x1000), 1);
        assert_eq!(maple::slot_of(&pivots, 15, 0x2fff), 2);
        // Past the last pivot of a full node: its last slot.
        let full: [u64; 15] = core::array::from_fn(|i| (i as u64 + 1) * 0x1000 - 1);
        assert_eq!(maple::slot_of(&full, 15, 0x1_0000), 15);
        assert_eq!(maple::slot_of(&full, 9, 0x9000), 9, "a node of 9 pivots");
    }

    #[test]
    fn node_entries_are_told_by_their_low_bits() {
        // A range node at 0xffff_8880_0012_3400: type 2 in bits 3-6, and
        // the internal-entry tag 0b10.
        let entry = 0xffff_8880_0012_3400 | (maple::RANGE_64 << 3) | 2;
        assert!(maple::is_node(entry));
        assert_eq!(maple::node_type(entry), maple::RANGE_64);
        assert_eq!(entry & !maple::NODE_MASK, 0xffff_8880_0012_3400);
        assert!(!maple::is_node(0xffff_8880_0012_3400), "a mapping itself");
        assert_eq!(maple::layout(maple::ARANGE_64), Some((9, 80)));
        assert_eq!(maple::layout(maple::LEAF_64), Some((15, 128)));
    }
}

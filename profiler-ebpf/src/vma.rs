//! The mapping that holds a PC, from the kernel's own tree of the current
//! process's mappings and the table the daemon published for its file
//! (`profiler_common::unwind::by_file`): how a process whose own mappings
//! are not published yet is walked by table.
use aya_ebpf::helpers::generated::{bpf_get_current_task_btf, bpf_loop, bpf_probe_read_kernel};
use core::ffi::c_void;
use profiler_common::unwind::{
    UnwindMapping, WalkState,
    by_file::{FileKey, FileOffsets, MapleWalk, maple},
};

use crate::{fields::read, maps};

/// x86-64's page size, which `vm_pgoff` counts in.
const PAGE_SHIFT: u64 = 12;

/// The bytes of a node's pivots read at once (a leaf's or range node's;
/// a node that tracks gaps has fewer, followed by its slots).
#[expect(clippy::cast_possible_truncation, reason = "120")]
const PIVOT_BYTES: u32 = size_of::<[u64; maple::RANGE_64_PIVOTS as usize]>() as u32;

/// The current process's mapping that holds `pc`, when its file's table is
/// published, and whether its new processes may wait to be read
/// (`FileTable::may_wait`). `context` is the walk's scratch, whose state's `maple` the
/// search uses.
#[inline(always)]
pub fn by_file(state: &mut WalkState, pc: u64, context: u32) -> Option<(UnwindMapping, bool)> {
    let at = maps::file_offsets();
    if !at.known() {
        return None;
    }
    // SAFETY: the helper returns the current task, valid for this run.
    let task = unsafe { bpf_get_current_task_btf() } as u64;
    let root = read::<u64>(read::<u64>(task, at.task_mm), at.mm_root);
    let vma = descend(&mut state.maple, root, pc, context)?;
    let start = read::<u64>(vma, at.vm_start);
    let end = read::<u64>(vma, at.vm_end);
    if !(start <= pc && pc < end) {
        return None;
    }
    let table = maps::file_table(&file_key(&at, vma)?)?;
    Some((table.mapping(start, end), table.may_wait != 0))
}

/// The leaf entry of the tree at `root` that holds `pc` (a mapping), one
/// level per iteration of a loop; `None` for a gap or a tree not read.
#[inline(always)]
fn descend(walk: &mut MapleWalk, root: u64, pc: u64, context: u32) -> Option<u64> {
    if !maple::is_node(root) {
        return None;
    }
    let mut context = context;
    // SAFETY: fields of this CPU's walk state, a per-CPU map value. The
    // loop's callback reaches the same memory through the map, so these
    // are volatile: the compiler must neither delay the stores past the
    // loop nor keep the loads from before it.
    unsafe {
        core::ptr::write_volatile(&raw mut walk.entry, root);
        core::ptr::write_volatile(&raw mut walk.index, pc);
        core::ptr::write_volatile(&raw mut walk.leaf, 0);
    }
    let callback: extern "C" fn(u64, *mut c_void) -> i64 = level;
    // SAFETY: `callback` is a static function with bpf_loop's callback
    // signature; its context is `context`, on this stack for the loop.
    unsafe {
        bpf_loop(
            maple::MAX_HEIGHT,
            callback as *mut c_void,
            (&raw mut context).cast(),
            0,
        )
    };
    // SAFETY: as above.
    let (leaf, entry) = unsafe {
        (
            core::ptr::read_volatile(&raw const walk.leaf),
            core::ptr::read_volatile(&raw const walk.entry),
        )
    };
    (leaf != 0 && entry != 0).then_some(entry)
}

/// One level of the descent: from the node `entry` points at to the slot
/// that holds the index; returns 1 to stop (a leaf reached, or a node not
/// read). `context` points at the walk's scratch number.
extern "C" fn level(_index: u64, context: *mut c_void) -> i64 {
    // SAFETY: `descend` passes a pointer to a u32 on its stack, alive for
    // the whole loop.
    let context = unsafe { *context.cast::<u32>() };
    let Some((state, _)) = maps::walk_scratch(context) else {
        return 1;
    };
    // SAFETY: this CPU's per-CPU entry, valid for the program's run; the
    // walk that started the loop does not touch it until the loop ends.
    let walk = unsafe { &mut (*state).maple };
    i64::from(!step(walk))
}

/// Moves `walk` one level down; false when it has ended (at a leaf's slot,
/// or with `entry` 0 when the tree could not be read).
#[inline(always)]
fn step(walk: &mut MapleWalk) -> bool {
    let entry = walk.entry;
    walk.entry = 0;
    if entry <= maple::NODE_MASK {
        return false;
    }
    let ty = maple::node_type(entry);
    let Some((count, slots_at)) = maple::layout(ty) else {
        return false;
    };
    let node = entry & !maple::NODE_MASK;
    // SAFETY: the fault-tolerant helper reads the node's pivots into the
    // walk's array, whose size it is given.
    let rc = unsafe {
        bpf_probe_read_kernel(
            walk.pivots.as_mut_ptr().cast(),
            PIVOT_BYTES,
            (node + u64::from(maple::PIVOTS_AT)) as *const c_void,
        )
    };
    // A node freed and taken out of the tree points at itself.
    if rc != 0 || read::<u64>(node, 0) & !maple::NODE_MASK == node {
        return false;
    }
    let slot = maple::slot_of(&walk.pivots, count, walk.index);
    walk.entry = read::<u64>(node, slots_at + 8 * slot);
    if ty == maple::LEAF_64 {
        walk.leaf = 1;
        return false;
    }
    true
}

/// The identity of the file mapped at `vma`; `None` for anonymous memory.
#[inline(always)]
fn file_key(at: &FileOffsets, vma: u64) -> Option<FileKey> {
    let file = read::<u64>(vma, at.vm_file);
    let inode = read::<u64>(file, at.f_inode);
    if inode == 0 {
        return None;
    }
    Some(FileKey {
        ino: read::<u64>(inode, at.i_ino),
        size: read::<u64>(inode, at.i_size),
        mtime: read::<i64>(inode, at.i_mtime_sec),
        offset: read::<u64>(vma, at.vm_pgoff) << PAGE_SHIFT,
    })
}

//! The daemon's dealings with its memory: glibc's allocator, which by
//! default keeps what a burst of work allocated and freed (reading every
//! binary of the host under `--all`, a window's symbolization) as resident
//! pages, and the main thread's stack.

/// Sets glibc's allocator up for a daemon whose work comes in bursts. Call
/// it first in `main`, before any other thread exists.
///
/// - One arena: by default each of the daemon's threads (the window loop,
///   the symbolizer, HTTP, push) gets an arena of its own, and each keeps
///   the pages it freed: on a host of 300 processes under `--all`, peak
///   RSS read 64 MiB with them and 46 MiB with one, at no CPU cost
///   measurable here (the threads seldom allocate at once).
/// - A fixed mmap threshold of 256 KiB: blocks that large (a window's
///   buffers, a binary's table being built) are mapped on their own and
///   unmapped when freed. By default the threshold rises to the largest
///   block freed so far (up to 32 MiB), after which such blocks come from
///   the heap and leave holes that stay resident. Measured under `--all`
///   (5 s windows, 60 s, two interleaved pairs): peak RSS 30.4-33.1 MB
///   against 35.2-35.5 MB, CPU no higher.
pub fn configure_malloc() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets glibc malloc parameters; the caller runs
    // it before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
    }
}

/// Returns the free pages of the heap to the kernel, after a burst of work
/// that freed what it built. glibc gives back only the heap's free top;
/// the pages freed below a live allocation stay resident, and the next
/// burst's peak stacks on them.
pub fn give_back_freed() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists, under
    // its lock; it may be called from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How much of the main thread's stack [`prefault_stack`] touches.
const STACK_PREFAULT: usize = 256 << 10;

/// Touches the main thread's stack 256 KiB deep, so that its pages are
/// mapped before the window loop's deep frames run. Real CPUs do not need
/// this; QEMU 7.2's TCG (Debian 12's, which runs the 6.1 kernel of the VM
/// tests) does. When the store of a `setcc` to memory page-faults, QEMU
/// runs the instruction again from flags it has already overwritten, so
/// a boolean stored on a fresh stack page can come out wrong. In up to
/// half the VM's runs this loaded `--all` as an empty `--pid`: `matches!(
/// target, Target::All)` compiled to `cmp; seto [rsp+1]`, the first touch
/// of an 8 KiB frame's last page. The cost is 256 KiB of resident stack.
#[inline(never)]
#[expect(clippy::large_stack_arrays, reason = "the stack is what it touches")]
pub fn prefault_stack() {
    let touched = [0u8; STACK_PREFAULT];
    std::hint::black_box(&touched);
}

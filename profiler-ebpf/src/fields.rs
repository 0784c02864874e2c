//! Reads of kernel struct fields at the offsets the daemon found in the
//! kernel's BTF (the eBPF side is Rust: no CO-RE relocations).
use aya_ebpf::helpers::bpf_probe_read_kernel;

/// The value at `base + offset`; zero when `base` is 0 or unreadable.
#[inline(always)]
pub fn read<T: Default>(base: u64, offset: u32) -> T {
    if base == 0 {
        return T::default();
    }
    // SAFETY: a read of kernel memory through the fault-tolerant helper.
    unsafe { bpf_probe_read_kernel((base + u64::from(offset)) as *const T) }.unwrap_or_default()
}

//! Rebuild the eBPF object when the linker changes (it is part of the
//! toolchain that produced the object, like rustc).
use which::which;

fn main() {
    if let Ok(bpf_linker) = which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", bpf_linker.display());
    }
}

/work/main/target/bpfel-unknown-none/release/deps/aya_ebpf_cty-9c0154b4bb217ca0.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-cty-0.3.0/src/lib.rs

/work/main/target/bpfel-unknown-none/release/deps/libaya_ebpf_cty-9c0154b4bb217ca0.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-cty-0.3.0/src/lib.rs

/work/main/target/bpfel-unknown-none/release/deps/libaya_ebpf_cty-9c0154b4bb217ca0.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-cty-0.3.0/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-cty-0.3.0/src/lib.rs:

/work/main/target/bpfel-unknown-none/release/deps/aya_ebpf_bindings-0931bedc483d2ddc.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-bindings-0.2.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-bindings-0.2.0/src/x86_64/bindings.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-bindings-0.2.0/src/x86_64/helpers.rs

/work/main/target/bpfel-unknown-none/release/deps/libaya_ebpf_bindings-0931bedc483d2ddc.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-bindings-0.2.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-bindings-0.2.0/src/x86_64/bindings.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-bindings-0.2.0/src/x86_64/helpers.rs

/work/main/target/bpfel-unknown-none/release/deps/libaya_ebpf_bindings-0931bedc483d2ddc.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-bindings-0.2.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-bindings-0.2.0/src/x86_64/bindings.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-bindings-0.2.0/src/x86_64/helpers.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-bindings-0.2.0/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-bindings-0.2.0/src/x86_64/bindings.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-ebpf-bindings-0.2.0/src/x86_64/helpers.rs:

/work/main/target/bpfel-unknown-none/release/deps/aya_log_ebpf-f3166d764bfc6b5d.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-ebpf-0.2.0/src/lib.rs

/work/main/target/bpfel-unknown-none/release/deps/libaya_log_ebpf-f3166d764bfc6b5d.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-ebpf-0.2.0/src/lib.rs

/work/main/target/bpfel-unknown-none/release/deps/libaya_log_ebpf-f3166d764bfc6b5d.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-ebpf-0.2.0/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-ebpf-0.2.0/src/lib.rs:

/work/main/target/release/deps/aya_log_ebpf_macros-24ea2ca0d682f32e.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-ebpf-macros-0.2.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-ebpf-macros-0.2.0/src/expand.rs

/work/main/target/release/deps/libaya_log_ebpf_macros-24ea2ca0d682f32e.so: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-ebpf-macros-0.2.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-ebpf-macros-0.2.0/src/expand.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-ebpf-macros-0.2.0/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-ebpf-macros-0.2.0/src/expand.rs:

/work/main/target/bpfel-unknown-none/release/deps/aya_log_common-ad2c769b41ae4780.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-common-0.2.0/src/lib.rs

/work/main/target/bpfel-unknown-none/release/deps/libaya_log_common-ad2c769b41ae4780.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-common-0.2.0/src/lib.rs

/work/main/target/bpfel-unknown-none/release/deps/libaya_log_common-ad2c769b41ae4780.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-common-0.2.0/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-common-0.2.0/src/lib.rs:

/work/main/target/release/deps/aya_log_common-e2c58f3fe0d09466.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-common-0.2.0/src/lib.rs

/work/main/target/release/deps/libaya_log_common-e2c58f3fe0d09466.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-common-0.2.0/src/lib.rs

/work/main/target/release/deps/libaya_log_common-e2c58f3fe0d09466.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-common-0.2.0/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-common-0.2.0/src/lib.rs:

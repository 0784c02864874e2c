/work/main/target/release/deps/aya_log_parser-0d75447a593c66ae.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-parser-0.2.0/src/lib.rs

/work/main/target/release/deps/libaya_log_parser-0d75447a593c66ae.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-parser-0.2.0/src/lib.rs

/work/main/target/release/deps/libaya_log_parser-0d75447a593c66ae.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-parser-0.2.0/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-log-parser-0.2.0/src/lib.rs:

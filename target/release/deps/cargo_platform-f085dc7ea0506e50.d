/work/main/target/release/deps/cargo_platform-f085dc7ea0506e50.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cargo-platform-0.3.3/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cargo-platform-0.3.3/src/cfg.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cargo-platform-0.3.3/src/error.rs

/work/main/target/release/deps/libcargo_platform-f085dc7ea0506e50.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cargo-platform-0.3.3/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cargo-platform-0.3.3/src/cfg.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cargo-platform-0.3.3/src/error.rs

/work/main/target/release/deps/libcargo_platform-f085dc7ea0506e50.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cargo-platform-0.3.3/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cargo-platform-0.3.3/src/cfg.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cargo-platform-0.3.3/src/error.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cargo-platform-0.3.3/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cargo-platform-0.3.3/src/cfg.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cargo-platform-0.3.3/src/error.rs:

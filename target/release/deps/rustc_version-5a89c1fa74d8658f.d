/work/main/target/release/deps/rustc_version-5a89c1fa74d8658f.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.4.1/src/lib.rs

/work/main/target/release/deps/librustc_version-5a89c1fa74d8658f.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.4.1/src/lib.rs

/work/main/target/release/deps/librustc_version-5a89c1fa74d8658f.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.4.1/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.4.1/src/lib.rs:

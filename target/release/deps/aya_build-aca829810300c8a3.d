/work/main/target/release/deps/aya_build-aca829810300c8a3.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-build-0.2.0/src/lib.rs

/work/main/target/release/deps/libaya_build-aca829810300c8a3.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-build-0.2.0/src/lib.rs

/work/main/target/release/deps/libaya_build-aca829810300c8a3.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-build-0.2.0/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/aya-build-0.2.0/src/lib.rs:

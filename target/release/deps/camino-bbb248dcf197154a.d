/work/main/target/release/deps/camino-bbb248dcf197154a.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/camino-1.2.6/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/camino-1.2.6/src/serde_impls.rs

/work/main/target/release/deps/libcamino-bbb248dcf197154a.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/camino-1.2.6/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/camino-1.2.6/src/serde_impls.rs

/work/main/target/release/deps/libcamino-bbb248dcf197154a.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/camino-1.2.6/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/camino-1.2.6/src/serde_impls.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/camino-1.2.6/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/camino-1.2.6/src/serde_impls.rs:

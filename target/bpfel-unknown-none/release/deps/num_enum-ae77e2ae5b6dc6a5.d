/work/main/target/bpfel-unknown-none/release/deps/num_enum-ae77e2ae5b6dc6a5.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/num_enum-0.7.6/src/lib.rs

/work/main/target/bpfel-unknown-none/release/deps/libnum_enum-ae77e2ae5b6dc6a5.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/num_enum-0.7.6/src/lib.rs

/work/main/target/bpfel-unknown-none/release/deps/libnum_enum-ae77e2ae5b6dc6a5.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/num_enum-0.7.6/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/num_enum-0.7.6/src/lib.rs:

/work/main/target/release/deps/num_enum-87ad88983ee4a38c.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/num_enum-0.7.6/src/lib.rs

/work/main/target/release/deps/libnum_enum-87ad88983ee4a38c.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/num_enum-0.7.6/src/lib.rs

/work/main/target/release/deps/libnum_enum-87ad88983ee4a38c.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/num_enum-0.7.6/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/num_enum-0.7.6/src/lib.rs:

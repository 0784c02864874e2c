/work/main/target/release/deps/which-b22776621dd912a2.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/checker.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/error.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/finder.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/helper.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/sys.rs

/work/main/target/release/deps/libwhich-b22776621dd912a2.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/checker.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/error.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/finder.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/helper.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/sys.rs

/work/main/target/release/deps/libwhich-b22776621dd912a2.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/checker.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/error.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/finder.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/helper.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/sys.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/checker.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/error.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/finder.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/helper.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/which-8.0.6/src/sys.rs:

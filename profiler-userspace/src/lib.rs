//! The profiler daemon as a library; `main.rs` is a thin binary over it.
//!
//! Data flows cli → preflight → bpf (load, drain) → window (symbolize) →
//! pprof → sink, driven by the window loop in `daemon`. See ARCHITECTURE.md.
pub mod bpf;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod pprof;
pub mod preflight;
pub mod procfs;
pub mod profile;
pub mod sink;
pub mod symbolize;
pub mod targets;
pub mod unwind;
pub mod window;

//! The profiler daemon as a library; `main.rs` is a thin binary over it.
//!
//! Data flows cli → preflight → bpf (load, drain) → pipeline (chunks into
//! windows) → window (symbolize) → pprof → sink, driven by the window loop
//! in `daemon`; `push` sends profiles to fleet backends; `http` serves
//! `on_demand` profiles and `metrics`. See
//! ARCHITECTURE.md.
pub mod assemble;
pub mod assembler;
pub mod bpf;
pub mod cgroup;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod gopclntab;
pub mod http;
pub mod mapping_events;
pub mod memory;
pub mod metrics;
pub mod on_demand;
pub mod pipeline;
pub mod pprof;
pub mod preflight;
pub(crate) mod process;
pub mod process_watch;
pub mod procfs;
pub mod profile;
pub mod push;
pub mod runtimes;
pub mod sample;
pub mod sink;
pub mod symbolize;
pub mod targets;
#[cfg(test)]
mod testing;
pub mod unwind;
pub mod window;

/// An error and its causes, outermost first, joined by ": ". Each error's
/// message names only its own operation and its source carries the cause
/// (as in aya), so this is how errors are printed and logged.
#[must_use]
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_chain_names_each_cause_once() {
        let io = std::io::Error::other("disk full");
        let error = crate::sink::SinkError::Write {
            path: "/x/profile.pb.gz".into(),
            source: io,
        };
        assert_eq!(
            super::error_chain(&error),
            "writing /x/profile.pb.gz: disk full"
        );
    }
}

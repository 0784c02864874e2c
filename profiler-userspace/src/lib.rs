//! The profiler daemon as a library; `main.rs` is a thin binary over it.
//!
//! Data flows cli → preflight → bpf (load, drain) → pipeline (chunks into
//! windows, their rows from the kernel and the language `runtimes`) →
//! window → symbolize → output (pprof, files, pushes, HTTP), driven by the
//! window loop in `daemon`; `process` holds what a process is, below all
//! of them, and `cpu_time` (where the daemon's CPU goes) below everything.
//! See ARCHITECTURE.md.
pub mod allocator;
pub(crate) mod assemble;
pub(crate) mod bpf;
pub mod cli;
pub(crate) mod clock;
pub(crate) mod config;
pub(crate) mod cpu_time;
pub mod daemon;
pub mod gopclntab;
pub(crate) mod mapping_events;
pub mod output;
pub(crate) mod pipeline;
pub mod preflight;
pub(crate) mod process;
pub(crate) mod process_watch;
pub(crate) mod profile;
pub mod runtimes;
pub(crate) mod sample;
pub(crate) mod symbolize;
pub(crate) mod symbolizer_thread;
pub(crate) mod targets;
#[cfg(test)]
mod testing;
pub mod unwind;
pub(crate) mod window;

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
        let error = crate::output::sink::SinkError::Write {
            path: "/x/profile.pb.gz".into(),
            source: io,
        };
        assert_eq!(
            super::error_chain(&error),
            "writing /x/profile.pb.gz: disk full"
        );
    }
}

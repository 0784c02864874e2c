//! The resource attributes a process's OpenTelemetry SDK published
//! (`process/otel_ctx.rs`), as labels of its samples, read at each window's
//! end while the process runs, so a context published or updated late is
//! taken in.
use std::sync::Arc;

use crate::{
    process::{memory::Memory, otel_ctx},
    sample::Label,
};

/// What reading processes' contexts counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextCounts {
    pub read: u64,
    pub unreadable: u64,
}

/// The labels of the context published at `at` in `pid`: each attribute
/// under its own key (`service.name`), as pprof labels and OTLP
/// attributes; `None` when it cannot be read (counted).
pub(super) fn labels(pid: u32, at: u64, counts: &mut ContextCounts) -> Option<Arc<[Label]>> {
    match otel_ctx::read(Memory { pid }, at) {
        Ok(attributes) => {
            counts.read += 1;
            Some(
                attributes
                    .into_iter()
                    .map(|(key, value)| Label::own(key, &value))
                    .collect(),
            )
        }
        Err(e) => {
            counts.unreadable += 1;
            log::debug!("pid {pid}: process context: {}", crate::error_chain(&e));
            None
        }
    }
}

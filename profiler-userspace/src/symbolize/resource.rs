//! The resource attributes a process's OpenTelemetry SDK published
//! (`process/otel_ctx.rs`), as labels of its samples, and the names of its
//! thread context records' attributes; read at each window's end while the
//! process runs, so a context published or updated late is taken in.
use std::sync::Arc;

use crate::{
    process::{memory::Memory, otel_ctx},
    sample::{Label, ThreadAttrValues},
};

/// What reading processes' contexts counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextCounts {
    pub read: u64,
    pub unreadable: u64,
}

/// A process's context as its samples use it.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// Its resource: each attribute under its own key (`service.name`), as
    /// pprof labels and OTLP attributes.
    pub resource: Arc<[Label]>,
    /// The names of its thread context records' attributes, by index.
    pub key_map: Arc<[String]>,
}

impl Context {
    /// The labels of thread context attributes `values`: each under the
    /// name its index has in the key map; an index outside the map is
    /// left out, as the specification says (`unnamed` counts them).
    pub fn attr_labels(&self, values: &ThreadAttrValues, unnamed: &mut u64) -> Vec<Label> {
        values
            .iter()
            .filter_map(|(index, value)| {
                let name = self
                    .key_map
                    .get(usize::from(*index))
                    .filter(|n| !n.is_empty());
                if name.is_none() {
                    *unnamed += 1;
                }
                Some(Label::own(name?.clone(), value))
            })
            .collect()
    }
}

/// The context published at `at` in `pid`; `None` when it cannot be
/// read (counted).
pub(super) fn read(pid: u32, at: u64, counts: &mut ContextCounts) -> Option<Arc<Context>> {
    match otel_ctx::read(Memory { pid }, at) {
        Ok(published) => {
            counts.read += 1;
            Some(Arc::new(Context {
                resource: published
                    .resource
                    .into_iter()
                    .map(|(key, value)| Label::own(key, &value))
                    .collect(),
                key_map: published.key_map.into(),
            }))
        }
        Err(e) => {
            counts.unreadable += 1;
            log::debug!("pid {pid}: process context: {}", crate::error_chain(&e));
            None
        }
    }
}

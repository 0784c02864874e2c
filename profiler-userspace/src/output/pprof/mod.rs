//! [`Profile`](crate::profile::Profile) → pprof protobuf bytes.
mod encode;
pub mod proto;

use std::io::Write as _;

pub use encode::{encode, encode_view};
use flate2::{Compression, write::GzEncoder};

/// `bytes` gzip'd, as pprof files and HTTP responses carry them, at the
/// fastest level, as Go's runtime/pprof writes them.
///
/// # Errors
/// Never in practice: the output is memory.
pub fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut gz = GzEncoder::new(Vec::with_capacity(bytes.len() / 4), Compression::fast());
    gz.write_all(bytes)?;
    gz.finish()
}

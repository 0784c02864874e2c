//! One window's data before symbolization: a window or chunk of the
//! sources' rows (`sample.rs`) with what they found besides (`chunk.rs`),
//! filled by its one owner while a chunk is drained (`collector.rs`), and
//! chunks merged (`merge.rs`). `assemble.rs` turns a window into its
//! profile.
mod chunk;
mod collector;
mod merge;

pub use chunk::RawWindow;
pub use collector::ChunkCollector;

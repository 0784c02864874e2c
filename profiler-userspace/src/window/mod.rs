//! One window's data before symbolization: a window or chunk of the
//! sources' rows (`sample.rs`) with what the pipeline attaches to them
//! (`chunk.rs`), and chunks merged (`merge.rs`). `assemble.rs` turns a
//! window into its profile.
mod chunk;
mod merge;

pub use chunk::RawWindow;

//! One window's data before symbolization: the sources' rows (`raw.rs`),
//! a window or chunk of them (`chunk.rs`), and chunks merged (`merge.rs`).
//! `assemble.rs` turns a window into its profile.
mod chunk;
mod merge;
mod raw;

pub use chunk::RawWindow;
pub use raw::{Goroutine, GoroutineStatus, MapEntries, RawSample, Stack};

//! Where profiles go: the pprof encoding (`pprof/`), files written and
//! rotated (`sink.rs`), pushes to fleet backends (`push/`), the HTTP
//! endpoints (`http.rs`) with their on-demand profiles (`on_demand.rs`),
//! and the daemon's own counters (`metrics.rs`).
pub(crate) mod http;
pub(crate) mod metrics;
pub(crate) mod on_demand;
pub mod pprof;
pub(crate) mod push;
pub(crate) mod sink;

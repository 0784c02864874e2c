//! [`Profile`](crate::profile::Profile) → pprof protobuf bytes.
mod encode;
pub mod proto;

pub use encode::encode;

//! A fake profiling backend for the push tests: it decodes what a real
//! Pyroscope, Parca or OpenTelemetry Collector would, enforces the rules
//! those servers enforce (shared/FLEET.md, from their sources), and answers
//! as the test tells it: accept, fail with 5xx, refuse with 400, or hang.
//!
//! It decodes with types nobody here wrote where they exist: Pyroscope's
//! push messages and pprof from Grafana's own `pyroscope` crate, OTLP from
//! the `opentelemetry-proto` crate. Parca's JSON gateway is checked
//! against its proto's field names (parca-dev/parca
//! `proto/parca/profilestore/v1alpha1/profilestore.proto`).
mod decode;
mod received;
mod server;

pub use decode::decode;
pub use received::{Protocol, Received, ReceivedSample};
pub use server::{Backend, Behaviour, Request};

//! Exists so that profiler-userspace can build-depend on this crate (cargo
//! then rebuilds it when the programs change); the programs are the binary.
#![no_std]

//! What a process is, below everything that reads one: its executable
//! mappings (`maps.rs`: `/proc/PID/maps`, queried by `PROCMAP_QUERY`
//! where the kernel has it, `procmap_query.rs`; the files' identities and
//! stamps, remembered briefly by identity: `stamps.rs`), the file a mapping saw and its build id (`files.rs`; build ids
//! read once per stamped file: `build_ids.rs`), and an image the kernel's
//! mmap records told of a process gone since (`recorded.rs`), what was
//! read of a process while it lived (`snapshot.rs`), its root held open
//! for files it mapped in another namespace or chroot (`roots.rs`); the small
//! `/proc` readers (`procfs.rs`) and its cgroup, service and container
//! (`cgroup.rs`; remembered by cgroup id on a unified-only host:
//! `placements.rs`); its memory (`memory.rs`, by `process_vm_readv`) and the
//! resource attributes an OpenTelemetry SDK published in it
//! (`otel_ctx.rs`). The
//! unwinder, the runtimes, the mmap records and the symbolizer take these
//! facts from here; this folder imports none of them.
pub mod build_ids;
pub mod cgroup;
pub mod files;
pub mod maps;
pub mod memory;
pub mod otel_ctx;
pub mod placements;
pub mod procfs;
pub mod procmap_query;
pub mod recorded;
pub mod roots;
pub mod snapshot;
pub mod stamps;

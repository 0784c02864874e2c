//! Flags for the tests and the bench only. They exist with the cargo
//! feature `test-knobs`, which `cargo xtask test` and `cargo xtask bench`
//! turn on; a product build has none of them and runs with their
//! defaults. (Their eBPF globals stay: they sit in the object's frozen
//! `.rodata`, so the verifier knows their values and removes the branches
//! they guard.)
use profiler_common::maps::INTERVAL_CELLS_LEN;

#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "test-knobs", derive(clap::Args))]
pub struct TestKnobs {
    /// Weight kept short off-CPU intervals by their raw duration (biased:
    /// for demonstrating the bias only).
    #[cfg_attr(feature = "test-knobs", arg(long = "off-cpu-naive-weights"))]
    pub naive_weights: bool,

    /// Attach the off-CPU programs but have them return at once: the
    /// bench's floor (what running them costs before any work).
    #[cfg_attr(feature = "test-knobs", arg(long = "off-cpu-dispatch-only"))]
    pub dispatch_only: bool,

    /// Take off-CPU user stacks as if the kernel had no BPF task work (at
    /// `rseq_update`): the bench's view of older kernels (the tests boot
    /// one: `cargo xtask vm-test`).
    #[cfg_attr(feature = "test-knobs", arg(long = "off-cpu-no-task-work"))]
    pub no_task_work: bool,

    /// Interval cells in use (a power of two, at most 65536): fewer make
    /// threads share cells, so tests reach the task-storage fallback.
    #[cfg_attr(
        feature = "test-knobs",
        arg(long = "off-cpu-interval-cells", default_value_t = INTERVAL_CELLS_LEN)
    )]
    pub interval_cells: u32,
}

impl Default for TestKnobs {
    /// What a product build runs with.
    fn default() -> Self {
        Self {
            naive_weights: false,
            dispatch_only: false,
            no_task_work: false,
            interval_cells: INTERVAL_CELLS_LEN,
        }
    }
}

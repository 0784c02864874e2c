//! `RUNTIME_PROCS` as the [`Kernel`] keeps it beside the runtimes' maps:
//! a process is in it, with one bit per runtime map that holds it, from
//! the first map's entry to the last one's removal. A real-kernel test
//! (root), in the crate because the kernel maps are not its public API.
use profiler_common::{
    go::GoProcess, process::RootSeen, runtimes::Runtimes, thread_ctx::ThreadCtxProcess,
};

use super::{GoMaps as _, Kernel, ThreadCtxMaps as _};
use crate::cli::{self, KernelLimits};

/// A pid above any the kernel hands out here (`pid_max` is at most
/// 4,194,304): no process's samples can meet its entries.
const PID: u32 = 4_194_400;

#[test]
fn a_process_is_noted_for_each_runtime_map_that_holds_it_until_the_last_lets_go() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "profiler".to_owned(),
        "--output-dir".to_owned(),
        dir.path().join("out").display().to_string(),
        "--pid".to_owned(),
        std::process::id().to_string(),
    ];
    let config = cli::parse(&args, KernelLimits::read()).unwrap();
    let mut kernel = Kernel::load(&config, &config.target, RootSeen::default()).unwrap();
    assert_eq!(kernel.runtimes_of(PID).unwrap(), Runtimes::NONE);

    kernel.set_go(PID, &GoProcess::default()).unwrap();
    kernel
        .set_thread_ctx(PID, ThreadCtxProcess::default())
        .unwrap();
    // Published again (a process whose layout is read anew): one bit still.
    kernel.set_go(PID, &GoProcess::default()).unwrap();
    let both = Runtimes::GO.with(Runtimes::THREAD_CTX);
    assert_eq!(kernel.runtimes_of(PID).unwrap(), both);

    kernel.remove_go(PID).unwrap();
    assert_eq!(kernel.runtimes_of(PID).unwrap(), Runtimes::THREAD_CTX);
    // Removed twice (forgotten again at exit): a no-op.
    kernel.remove_go(PID).unwrap();
    assert_eq!(kernel.runtimes_of(PID).unwrap(), Runtimes::THREAD_CTX);

    kernel.remove_thread_ctx(PID).unwrap();
    assert_eq!(kernel.runtimes_of(PID).unwrap(), Runtimes::NONE);
}

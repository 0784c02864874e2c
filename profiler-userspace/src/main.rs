//! `profiler`: parse flags, check the machine, run the window loop.
use std::{io::IsTerminal as _, process::ExitCode};

use profiler_userspace::{allocator, cli, daemon, error_chain, preflight};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    allocator::configure_malloc();
    allocator::prefault_stack();
    // Colour only for a person at a terminal: journald and files get plain
    // text, and NO_COLOR (https://no-color.org) turns it off.
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_env_filter(
            EnvFilter::try_from_env("PROFILER_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();

    let config = match cli::parse(std::env::args_os(), cli::KernelLimits::read()) {
        Ok(config) => config,
        Err(e) => e.exit(),
    };
    if let Err(e) = preflight::check(&config) {
        eprintln!("profiler: error: {}", error_chain(&e));
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("profiler: error: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(daemon::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("profiler: error: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

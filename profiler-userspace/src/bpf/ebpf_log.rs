//! The eBPF programs' log channel (aya-log), copied into tracing.
use tokio::io::unix::AsyncFd;

/// The programs' log channel.
pub(super) type Logger = aya_log::EbpfLogger<&'static dyn log::Log>;

/// Copies `logger`'s records into tracing from now on, on the tokio
/// runtime.
pub(super) fn forward(logger: Logger) {
    // SAFETY: the EbpfLogger owns its ring buffer's fd, which stays open
    // and unchanged until the logger (moved into the AsyncFd) is dropped.
    let registered =
        unsafe { AsyncFd::register_with_interest(logger, tokio::io::Interest::READABLE) };
    let mut logger = match registered {
        Ok(logger) => logger,
        Err(e) => {
            tracing::warn!("eBPF log channel: {e}");
            return;
        }
    };
    tokio::spawn(async move {
        loop {
            let Ok(mut guard) = logger.readable_mut().await else {
                return;
            };
            guard.get_inner_mut().flush();
            guard.clear_ready();
        }
    });
}

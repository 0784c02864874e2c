//! The eBPF programs' log channel (aya-log), copied into tracing.
use tokio::io::unix::AsyncFd;

use super::Kernel;

impl Kernel {
    /// Copies the programs' log records into tracing from now on, on the
    /// tokio runtime; without a log channel (the object was built without
    /// one, or the kernel refused it) there is nothing to copy.
    pub fn forward_logs(&mut self) {
        let Some(logger) = self.logger.take() else {
            return;
        };
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
}

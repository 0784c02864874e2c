//! What ends the daemon with an error: each part's failure, named by the
//! part; the source carries the cause.
use crate::{
    bpf::KernelError,
    output::{http::HttpError, push::PushError, sink::SinkError},
    symbolizer_thread::AssemblerError,
};

/// Why the daemon stopped.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error("installing signal handlers")]
    Signals(#[source] std::io::Error),
    #[error("final profile not written")]
    FinalWrite(#[source] SinkError),
    #[error(transparent)]
    Symbolizer(#[from] AssemblerError),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error(transparent)]
    Push(#[from] PushError),
}

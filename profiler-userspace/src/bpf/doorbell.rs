//! The walker's doorbell (`UNWIND_DOORBELL`): a ring buffer the kernel
//! writes a pid to when it puts a new request in `UNWIND_REQUESTS`, so that
//! the daemon serves it at once rather than at its next poll. The records
//! are only a wakeup: the requests map is what is served.
use aya::maps::{Map, MapData, RingBuf};
use profiler_common::maps::UNWIND_DOORBELL;
use tokio::io::unix::AsyncFd;

use super::error::KernelError;

/// The doorbell, registered with the tokio runtime.
pub struct Doorbell(AsyncFd<RingBuf<MapData>>);

impl Doorbell {
    /// Registers `map` (the object's `UNWIND_DOORBELL`) with the runtime.
    pub(super) fn new(map: Map) -> Result<Self, KernelError> {
        let ring = RingBuf::try_from(map).map_err(KernelError::map(UNWIND_DOORBELL))?;
        // SAFETY: the RingBuf owns its map's fd, which stays open and
        // unchanged until the ring (moved into the AsyncFd) is dropped.
        unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
            .map(Self)
            .map_err(|e| KernelError::MapIo {
                name: UNWIND_DOORBELL,
                source: e.into_parts().1,
            })
    }

    /// Waits until the kernel rings, then empties the ring.
    ///
    /// # Errors
    /// When the runtime cannot wait on it.
    pub async fn rung(&mut self) -> Result<(), KernelError> {
        let mut ready = self
            .0
            .readable_mut()
            .await
            .map_err(|source| KernelError::MapIo {
                name: UNWIND_DOORBELL,
                source,
            })?;
        let ring = ready.get_inner_mut();
        while ring.next().is_some() {}
        ready.clear_ready();
        Ok(())
    }
}

//! The walker's doorbell (`UNWIND_DOORBELL`): a ring buffer the kernel
//! writes to when it puts a new request in `UNWIND_REQUESTS` or a
//! runtime's request map, so that the daemon serves it at once rather
//! than at its next poll. The records are only a wakeup, saying which maps
//! to serve: the request maps are what is served.
use aya::maps::{Map, MapData, RingBuf};
use profiler_common::maps::{RANG_MAPPINGS, RANG_RUNTIMES, UNWIND_DOORBELL};
use tokio::io::unix::AsyncFd;

use super::error::KernelError;

/// Which request maps the kernel rang for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rang {
    /// `UNWIND_REQUESTS`.
    pub mappings: bool,
    /// The Python, Java and Go request maps.
    pub runtimes: bool,
}

impl Rang {
    /// Adds what one record says (a record of another size rings all).
    fn add(&mut self, record: &[u8]) {
        let bits = record
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map_or(RANG_MAPPINGS | RANG_RUNTIMES, u32::from_ne_bytes);
        self.mappings |= bits & RANG_MAPPINGS != 0;
        self.runtimes |= bits & RANG_RUNTIMES != 0;
    }
}

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

    /// Waits until the kernel rings, then empties the ring: which maps
    /// it rang for.
    ///
    /// # Errors
    /// When the runtime cannot wait on it.
    pub async fn rung(&mut self) -> Result<Rang, KernelError> {
        let mut ready = self
            .0
            .readable_mut()
            .await
            .map_err(|source| KernelError::MapIo {
                name: UNWIND_DOORBELL,
                source,
            })?;
        let records = ready.get_inner_mut();
        let mut rang = Rang::default();
        while let Some(record) = records.next() {
            rang.add(&record);
        }
        ready.clear_ready();
        Ok(rang)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Rang = Rang {
        mappings: true,
        runtimes: true,
    };

    #[test]
    fn a_record_names_the_maps_rung() {
        let mut rang = Rang::default();
        rang.add(&RANG_RUNTIMES.to_ne_bytes());
        assert_eq!(
            rang,
            Rang {
                mappings: false,
                runtimes: true
            }
        );
        rang.add(&RANG_MAPPINGS.to_ne_bytes());
        assert_eq!(rang, ALL);
        let mut short = Rang::default();
        short.add(&[1]);
        assert_eq!(short, ALL);
    }
}

//! The walker's doorbell (`UNWIND_DOORBELL`): a ring buffer the kernel
//! writes to when it puts a new request in `UNWIND_REQUESTS` or a
//! runtime's request map, so that the daemon serves it at once rather
//! than at its next poll. The records are only a wakeup, saying which maps
//! to serve: the request maps are what is served.
use aya::maps::{Map, MapData, RingBuf};
use profiler_common::maps::{
    RANG_GO_LABELS, RANG_JAVA, RANG_MAPPINGS, RANG_PYTHON, UNWIND_DOORBELL,
};
use tokio::io::unix::AsyncFd;

use super::error::KernelError;

/// Which request maps the kernel rang for: the records' bits, or'ed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rang(u32);

impl Rang {
    /// Adds what one record says (a record of another size rings all).
    fn add(&mut self, record: &[u8]) {
        self.0 |= record
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map_or(u32::MAX, u32::from_ne_bytes);
    }

    /// `UNWIND_REQUESTS`.
    #[must_use]
    pub fn mappings(self) -> bool {
        self.0 & RANG_MAPPINGS != 0
    }

    /// The Python walk's request map.
    #[must_use]
    pub fn python(self) -> bool {
        self.0 & RANG_PYTHON != 0
    }

    /// The Java walk's request map.
    #[must_use]
    pub fn java(self) -> bool {
        self.0 & RANG_JAVA != 0
    }

    /// The Go labels' request map.
    #[must_use]
    pub fn go_labels(self) -> bool {
        self.0 & RANG_GO_LABELS != 0
    }

    /// Whether any runtime's request map rang.
    #[must_use]
    pub fn runtimes(self) -> bool {
        self.python() || self.java() || self.go_labels()
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

    #[test]
    fn a_record_names_the_maps_rung() {
        let mut rang = Rang::default();
        assert!(!rang.runtimes() && !rang.mappings());
        rang.add(&RANG_PYTHON.to_ne_bytes());
        assert!(rang.python() && rang.runtimes());
        assert!(!rang.java() && !rang.go_labels() && !rang.mappings());
        rang.add(&RANG_JAVA.to_ne_bytes());
        rang.add(&RANG_GO_LABELS.to_ne_bytes());
        assert!(rang.java() && rang.go_labels() && !rang.mappings());
        rang.add(&RANG_MAPPINGS.to_ne_bytes());
        assert!(rang.mappings());
        let mut short = Rang::default();
        short.add(&[1]);
        assert!(short.mappings() && short.python() && short.java() && short.go_labels());
    }
}

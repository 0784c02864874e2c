//! A JVM's code cache as the walk needs it: its bounds and each code
//! heap's blobs and segment map, read once the JVM has set them up.
use profiler_common::java::{CODE_HEAPS_MAX, CodeHeap, JavaProcess};

use super::layout::Layout;
use crate::process::memory::{Memory, u64_at};

#[derive(Debug, thiserror::Error)]
pub enum CodeCacheError {
    #[error("reading the code cache")]
    Read(#[source] std::io::Error),
    #[error("the code cache is not set up yet")]
    NotReady,
    #[error("the code cache has {0} heaps")]
    Heaps(u64),
}

/// What the walk needs of the JVM process `memory`, whose `libjvm.so` is
/// loaded with `bias`.
///
/// # Errors
/// When the code cache cannot be read, or the JVM has not set it up yet.
pub fn read(memory: Memory, layout: &Layout, bias: u64) -> Result<JavaProcess, CodeCacheError> {
    let cache = &layout.code_cache;
    let word = |at: u64| -> Result<u64, CodeCacheError> {
        let mut bytes = [0u8; 8];
        memory.read(at, &mut bytes).map_err(CodeCacheError::Read)?;
        Ok(u64::from_le_bytes(bytes))
    };
    let (low, high) = (
        word(cache.low_bound.wrapping_add(bias))?,
        word(cache.high_bound.wrapping_add(bias))?,
    );
    let array = word(cache.heaps.wrapping_add(bias))?;
    if array == 0 || low == 0 || high <= low {
        return Err(CodeCacheError::NotReady);
    }
    let len = word(array + cache.array_len)? & 0xffff_ffff;
    let data = word(array + cache.array_data)?;
    if len == 0 || data == 0 {
        return Err(CodeCacheError::NotReady);
    }
    let count = usize::try_from(len).unwrap_or(usize::MAX);
    if count > CODE_HEAPS_MAX {
        return Err(CodeCacheError::Heaps(len));
    }
    let mut process = JavaProcess {
        code_lo: low,
        code_hi: high,
        layout: layout.kernel,
        ..JavaProcess::default()
    };
    for (i, slot) in process.heaps.iter_mut().take(count).enumerate() {
        let heap = word(data + 8 * i as u64)?;
        let mut bytes = vec![0u8; 512];
        memory
            .read(heap, &mut bytes)
            .map_err(CodeCacheError::Read)?;
        let at = |offset: u64| u64_at(&bytes, offset).ok_or(CodeCacheError::NotReady);
        *slot = CodeHeap {
            low: at(cache.heap_memory + cache.space_low)?,
            high: at(cache.heap_memory + cache.space_high)?,
            segmap: at(cache.heap_segmap + cache.space_low)?,
        };
        let shift = u8::try_from(at(cache.heap_segment_shift)? & 31).unwrap_or(0);
        process.layout.segment_shift = shift;
    }
    #[expect(clippy::cast_possible_truncation, reason = "at most 3")]
    let heaps = count as u8;
    process.layout.heaps = heaps;
    Ok(process)
}

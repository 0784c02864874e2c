//! Uncompressed copies of ELF files whose DWARF sections are compressed
//! (`SHF_COMPRESSED`, zlib), as distributions ship their debug files.
//!
//! blazesym inflates such a section into the heap every time it parses the
//! file: for Debian's libc debug file, 4 MB on disk, that is about 10 MB
//! of heap and 30-40 ms of CPU. And it parses the file again each time
//! `parsed.rs` has dropped it. A copy with the sections stored plain is
//! read through its mapping instead: nothing is inflated, and only the
//! pages a lookup touches are read, clean and reclaimable.
//!
//! The copy is the original file unchanged, followed by the inflated
//! sections and a new section header table that points at them (the ELF
//! header's `e_shoff` is the one byte range rewritten), so every file
//! offset and program header of the original still holds. Copies are kept
//! in a cache directory by build id, written under a temporary name and
//! renamed, and the oldest are removed past a size budget. A copy in use is
//! read through a descriptor this daemon holds (`/proc/self/fd/N`), so
//! another daemon's eviction cannot pull it away.
use std::{
    collections::HashMap,
    fs::{self, File},
    io::{self, BufWriter, Read as _, Seek as _, SeekFrom, Write as _},
    os::fd::AsRawFd as _,
    path::{Path, PathBuf},
    time::SystemTime,
};

use object::{
    Endianness, elf,
    pod::{bytes_of, bytes_of_slice},
    read::elf::{FileHeader as _, SectionHeader as _},
};

use crate::config::DebugCache;
use crate::process::files::hex;

/// Why a copy could not be made (the original is read instead).
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("reading the ELF file")]
    Read(#[source] io::Error),
    #[error("parsing the ELF file")]
    Parse(#[source] object::Error),
    #[error("writing the copy")]
    Write(#[source] io::Error),
    #[error("inflating section {index}: {got} bytes for the {expected} its header says")]
    Size {
        index: usize,
        got: u64,
        expected: u64,
    },
}

/// The copies this daemon reads, by the original's path.
pub struct Inflated {
    config: DebugCache,
    /// Original → what to read instead (`None`: the original itself).
    chosen: HashMap<PathBuf, Option<(File, PathBuf)>>,
}

impl Inflated {
    #[must_use]
    pub fn new(config: DebugCache) -> Self {
        Self {
            config,
            chosen: HashMap::new(),
        }
    }

    /// The path to read `original` (with build id `build_id`) through: a
    /// plain copy if its DWARF is compressed and a copy can be had, else
    /// `original`. Decided once per file.
    pub fn path_for(&mut self, original: &Path, build_id: Option<&[u8]>) -> PathBuf {
        let chosen = self.chosen.entry(original.to_owned()).or_insert_with(|| {
            match build_id.map(|id| copy(&self.config, original, &hex(id))) {
                Some(Ok(found)) => found,
                Some(Err(e)) => {
                    tracing::warn!(
                        "reading {} as it is, its compressed sections inflated in memory: {}",
                        original.display(),
                        crate::error_chain(&e)
                    );
                    None
                }
                None => None,
            }
        });
        chosen
            .as_ref()
            .map_or_else(|| original.to_owned(), |(_, path)| path.clone())
    }
}

/// The copy of `original` (build id `id`, hex) in the cache, made if
/// missing, opened: `None` when `original` has nothing compressed, or its
/// copy would not fit the budget.
fn copy(
    config: &DebugCache,
    original: &Path,
    id: &str,
) -> Result<Option<(File, PathBuf)>, CopyError> {
    let file = File::open(original).map_err(CopyError::Read)?;
    // Private, as every mapping the daemon makes itself (`resident.rs`).
    // SAFETY: read-only and dropped before returning; a file truncated under
    // us could fault, as for every mapped binary the symbolizer reads.
    let data = unsafe { memmap2::MmapOptions::new().map_copy_read_only(&file) }
        .map_err(CopyError::Read)?;
    let Some(layout) = Layout::of(&data)? else {
        return Ok(None);
    };
    if layout.size > config.max_bytes {
        return Ok(None);
    }
    let path = config.dir.join(format!("{id}.debug"));
    if let Ok(kept) = File::open(&path)
        && kept.metadata().is_ok_and(|m| m.len() == layout.size)
    {
        // Marks it used, for the eviction order.
        let _ = kept.set_modified(SystemTime::now());
        return Ok(Some(through_descriptor(kept)));
    }
    fs::create_dir_all(&config.dir).map_err(CopyError::Write)?;
    let temporary = config
        .dir
        .join(format!(".{id}.{}.partial", std::process::id()));
    let written = layout
        .write(&data, &temporary)
        .and_then(|()| fs::rename(&temporary, &path).map_err(CopyError::Write));
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written?;
    evict_beyond(&config.dir, config.max_bytes, &path);
    let kept = File::open(&path).map_err(CopyError::Read)?;
    Ok(Some(through_descriptor(kept)))
}

/// `file` with a path that reaches it while this daemon holds it open.
fn through_descriptor(file: File) -> (File, PathBuf) {
    let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    (file, path)
}

/// Removes the least recently used copies in `dir` but `keep` until they
/// take at most `max_bytes`.
fn evict_beyond(dir: &Path, max_bytes: u64, keep: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut copies: Vec<(SystemTime, u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let meta = e.metadata().ok().filter(fs::Metadata::is_file)?;
            Some((meta.modified().ok()?, meta.len(), e.path()))
        })
        .collect();
    let mut total: u64 = copies.iter().map(|&(_, len, _)| len).sum();
    copies.sort();
    for (_, len, path) in copies {
        if total <= max_bytes {
            break;
        }
        if path != keep && fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
}

/// Where a plain copy puts what: the original's header and section
/// headers, the compressed sections, and the copy's size.
struct Layout {
    endian: Endianness,
    header: elf::FileHeader64<Endianness>,
    sections: Vec<elf::SectionHeader64<Endianness>>,
    /// Index, compressed bytes' range, inflated size and alignment.
    compressed: Vec<(usize, (u64, u64), u64, u64)>,
    size: u64,
}

impl Layout {
    /// The layout of a plain copy of the ELF file `data`: `None` when no
    /// section is compressed with zlib (or it is not a 64-bit ELF file).
    fn of(data: &[u8]) -> Result<Option<Self>, CopyError> {
        let Ok(header) = elf::FileHeader64::<Endianness>::parse(data) else {
            return Ok(None);
        };
        let endian = header.endian().map_err(CopyError::Parse)?;
        let sections = header
            .section_headers(endian, data)
            .map_err(CopyError::Parse)?
            .to_vec();
        let mut compressed = Vec::new();
        for (index, section) in sections.iter().enumerate() {
            let Some((chdr, offset, size)) = section
                .compression(endian, data)
                .map_err(CopyError::Parse)?
            else {
                continue;
            };
            if chdr.ch_type.get(endian) == elf::ELFCOMPRESS_ZLIB {
                // DWARF sections align to 8 at most; a wild value is not
                // worth padding the copy for.
                let align = chdr.ch_addralign.get(endian).clamp(1, 4096);
                compressed.push((index, (offset, size), chdr.ch_size.get(endian), align));
            }
        }
        if compressed.is_empty() {
            return Ok(None);
        }
        let mut size = data.len() as u64;
        for &(_, _, inflated, align) in &compressed {
            size = padded(size, align).saturating_add(inflated);
        }
        let table = size_of_val(sections.as_slice()) as u64;
        let size = padded(size, 8).saturating_add(table);
        Ok(Some(Self {
            endian,
            header: *header,
            sections,
            compressed,
            size,
        }))
    }

    /// Writes the plain copy of `data` to `path`, synced.
    fn write(mut self, data: &[u8], path: &Path) -> Result<(), CopyError> {
        let file = File::create(path).map_err(CopyError::Write)?;
        let mut out = Counted {
            inner: BufWriter::new(file),
            at: 0,
        };
        out.write_all(data).map_err(CopyError::Write)?;
        for &(index, (offset, size), inflated, align) in &self.compressed {
            out.pad_to(align).map_err(CopyError::Write)?;
            let start = out.at;
            #[expect(clippy::cast_possible_truncation, reason = "within the mapped file")]
            let bytes = &data[offset as usize..(offset + size) as usize];
            io::copy(&mut flate2::read::ZlibDecoder::new(bytes), &mut out)
                .map_err(CopyError::Write)?;
            let got = out.at - start;
            if got != inflated {
                return Err(CopyError::Size {
                    index,
                    got,
                    expected: inflated,
                });
            }
            let e = self.endian;
            let section = &mut self.sections[index];
            let flags = section.sh_flags.get(e) & !u64::from(elf::SHF_COMPRESSED);
            section.sh_flags.set(e, flags);
            section.sh_offset.set(e, start);
            section.sh_size.set(e, inflated);
            section.sh_addralign.set(e, align);
        }
        out.pad_to(8).map_err(CopyError::Write)?;
        self.header.e_shoff.set(self.endian, out.at);
        out.write_all(bytes_of_slice(&self.sections))
            .map_err(CopyError::Write)?;
        let mut file = out
            .inner
            .into_inner()
            .map_err(|e| CopyError::Write(e.into_error()))?;
        file.seek(SeekFrom::Start(0)).map_err(CopyError::Write)?;
        file.write_all(bytes_of(&self.header))
            .map_err(CopyError::Write)?;
        file.sync_all().map_err(CopyError::Write)
    }
}

/// `at` rounded up to a multiple of `align`, saturating (the size of a
/// copy that cannot be, which no budget admits).
fn padded(at: u64, align: u64) -> u64 {
    at.checked_next_multiple_of(align).unwrap_or(u64::MAX)
}

/// A writer that knows how many bytes went through it.
struct Counted<W> {
    inner: W,
    at: u64,
}

impl<W: io::Write> Counted<W> {
    fn pad_to(&mut self, align: u64) -> io::Result<()> {
        let pad = self.at.next_multiple_of(align) - self.at;
        io::copy(&mut io::repeat(0).take(pad), self)?;
        Ok(())
    }
}

impl<W: io::Write> io::Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.at += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests;

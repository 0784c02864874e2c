//! Executable mappings of a process, from `/proc/<pid>/maps`.
use std::{io, path::PathBuf, sync::Arc};

use super::procmap_query::{self, Mapping};

/// The exact file behind a mapping, even when deleted or in another mount
/// namespace.
pub(crate) fn map_files_path(pid: u32, vma: &Vma) -> PathBuf {
    PathBuf::from(format!(
        "/proc/{pid}/map_files/{:x}-{:x}",
        vma.start, vma.end
    ))
}

/// One executable mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    /// Offset in the file of `start`.
    pub offset: u64,
    /// File path, or a pseudo name like `[vdso]`; empty for anonymous memory.
    pub path: Arc<str>,
    /// The mapped file's device and inode, where known.
    pub file: Option<FileId>,
}

/// A file's device and inode: which file a path named when it was mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    /// `makedev(major, minor)`, as `stat` reports it.
    pub dev: u64,
    pub inode: u64,
}

impl FileId {
    /// The identity of device `major:minor`, inode `inode`; `None` for
    /// memory that no file backs (inode 0).
    #[must_use]
    pub fn new(major: u32, minor: u32, inode: u64) -> Option<Self> {
        (inode != 0).then(|| Self {
            dev: libc::makedev(major, minor),
            inode,
        })
    }

    /// Whether `path` is still this file.
    #[must_use]
    pub fn matches(&self, path: &std::path::Path) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(path).is_ok_and(|m| m.dev() == self.dev && m.ino() == self.inode)
    }
}

/// The file behind a mapping as it is now: its identity, size and
/// modification time. A file rewritten in place changes size or mtime; one
/// replaced by rename is another inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileStamp {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: i64,
}

impl FileStamp {
    /// The stamp of the file `pid` maps at `vma` (through `map_files`, so
    /// deleted and containerised files work); `None` once it is gone.
    #[must_use]
    pub fn of_mapping(pid: u32, vma: &Vma) -> Option<Self> {
        Self::of_path(&map_files_path(pid, vma))
    }

    /// The stamp of the file at `path`; `None` when there is none.
    #[must_use]
    pub fn of_path(path: &std::path::Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt as _;
        let meta = std::fs::metadata(path).ok()?;
        Some(Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: meta.mtime(),
        })
    }
}

impl From<Mapping> for Vma {
    fn from(m: Mapping) -> Self {
        Self {
            start: m.start,
            end: m.end,
            offset: m.offset,
            path: Arc::from(m.name),
            file: FileId::new(m.dev_major, m.dev_minor, m.inode),
        }
    }
}

impl Vma {
    /// Whether the mapping is backed by a file we can read symbols from.
    #[must_use]
    pub fn is_file(&self) -> bool {
        self.path.starts_with('/')
    }

    /// The address as an offset into the mapped file (a return address
    /// at the mapping's very start is looked up one byte before it: that
    /// byte is the mapping's first).
    #[must_use]
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr.saturating_sub(self.start) + self.offset
    }
}

/// Reads the executable mappings of `pid`, sorted by address: by
/// `PROCMAP_QUERY` where the kernel has it (`procmap_query.rs`), else
/// from the text.
///
/// # Errors
/// When the process is gone or its maps are not readable.
pub fn read(pid: u32) -> io::Result<Vec<Vma>> {
    if let Some(read) = procmap_query::read(pid) {
        return read.map(|mappings| mappings.into_iter().map(Vma::from).collect());
    }
    crate::process::procfs::read(format!("/proc/{pid}/maps")).map(|text| parse(&text))
}

/// As [`read`], with the address of the OpenTelemetry process context's
/// mapping when the process published one (`otel_ctx.rs`), from the same
/// text.
///
/// # Errors
/// As [`read`].
pub fn read_with_ctx(pid: u32) -> io::Result<(Vec<Vma>, Option<u64>)> {
    let text = crate::process::procfs::read(format!("/proc/{pid}/maps"))?;
    let ctx = text
        .contains("OTEL_CTX")
        .then(|| crate::process::otel_ctx::find(&text))
        .flatten();
    Ok((parse(&text), ctx))
}

/// Parses the text of a maps file, keeping executable mappings only.
#[must_use]
pub fn parse(text: &str) -> Vec<Vma> {
    // Only executable lines are parsed whole: a process maps many more
    // others (heap, stacks, data), and this runs for every new process.
    let executable = |perms: &str| perms.as_bytes().get(2) == Some(&b'x');
    let mut vmas: Vec<Vma> = text
        .lines()
        .filter(|line| line.split(' ').nth(1).is_some_and(executable))
        .filter_map(parse_line)
        .map(|(vma, _)| vma)
        .collect();
    vmas.sort_by_key(|vma| vma.start);
    vmas
}

/// Every mapping of a maps file's text, with its permissions (`r-xp`).
pub fn every_mapping(text: &str) -> impl Iterator<Item = (Vma, &str)> {
    text.lines().filter_map(parse_line)
}

fn parse_line(line: &str) -> Option<(Vma, &str)> {
    // start-end perms offset dev inode [path]
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    let inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim_start();
    let vma = Vma {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset: u64::from_str_radix(offset, 16).ok()?,
        path: Arc::from(path.strip_suffix(" (deleted)").unwrap_or(path)),
        file: FileId::new(
            u32::from_str_radix(major, 16).ok()?,
            u32::from_str_radix(minor, 16).ok()?,
            inode.parse().ok()?,
        ),
    };
    Some((vma, perms))
}

/// The entry whose mapping contains `addr`, in `entries` sorted by start.
pub fn find<T>(entries: &[T], addr: u64, vma: impl Fn(&T) -> &Vma) -> Option<&T> {
    let i = entries.partition_point(|e| vma(e).start <= addr);
    entries[..i].last().filter(|e| addr < vma(e).end)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a20000 r--p 00000000 fd:00 1234   /usr/bin/spin
55d0c0a20000-55d0c0a80000 r-xp 00020000 fd:00 1234   /usr/bin/spin
7f0000000000-7f0000021000 rw-p 00000000 00:00 0
7f1000000000-7f1000100000 r-xp 00028000 fd:00 99     /lib/x86_64-linux-gnu/libc.so.6 (deleted)
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0      [vdso]
";

    #[test]
    fn the_query_reads_what_the_text_says() {
        let pid = std::process::id();
        let text = || {
            let mut vmas =
                parse(&crate::process::procfs::read(format!("/proc/{pid}/maps")).unwrap());
            vmas.retain(|vma| &*vma.path != "[vsyscall]");
            vmas
        };
        // A mapping made between the two reads makes them differ: tried
        // again.
        let mut last = None;
        for _ in 0..5 {
            let Some(queried) = procmap_query::read(pid) else {
                // A kernel before 6.11: the text is read instead.
                return;
            };
            let queried: Vec<Vma> = queried.unwrap().into_iter().map(Vma::from).collect();
            let text = text();
            if queried == text {
                return;
            }
            last = Some((queried, text));
        }
        panic!("PROCMAP_QUERY and /proc/PID/maps disagree five times: {last:#?}");
    }

    #[test]
    fn keeps_executable_mappings() {
        let vmas = parse(MAPS);
        assert_eq!(vmas.len(), 3);
        assert_eq!(&*vmas[0].path, "/usr/bin/spin");
        assert_eq!(vmas[0].offset, 0x20000);
        assert_eq!(&*vmas[1].path, "/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(&*vmas[2].path, "[vdso]");
        assert!(!vmas[2].is_file());
        assert_eq!(
            vmas[0].file,
            Some(FileId {
                dev: libc::makedev(0xfd, 0),
                inode: 1234
            })
        );
        assert_eq!(vmas[2].file, None, "no file behind the vDSO");
    }

    #[test]
    fn a_file_id_tells_a_replaced_file() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bin");
        std::fs::write(&path, b"one").unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        let id = FileId {
            dev: meta.dev(),
            inode: meta.ino(),
        };
        assert!(id.matches(&path));
        // Replaced as package managers do: a new file renamed over it.
        let new = dir.path().join("bin.new");
        std::fs::write(&new, b"two").unwrap();
        std::fs::rename(&new, &path).unwrap();
        assert!(!id.matches(&path), "a new file at the same path");
        std::fs::remove_file(&path).unwrap();
        assert!(!id.matches(&path), "no file");
    }

    #[test]
    fn finds_containing_mapping() {
        let vmas = parse(MAPS);
        let vma = find(&vmas, 0x55d0_c0a2_1000, |v| v).unwrap();
        assert_eq!(vma.file_offset(0x55d0_c0a2_1000), 0x21000);
        assert!(
            find(&vmas, 0x55d0_c0a8_0000, |v| v).is_none(),
            "end is exclusive"
        );
        assert!(find(&vmas, 0x1000, |v| v).is_none());
        assert!(
            find(&vmas, 0x7f00_0000_0010, |v| v).is_none(),
            "not executable"
        );
    }
}

//! Byte offsets of kernel struct fields, from the kernel's BTF
//! (`/sys/kernel/btf/vmlinux`).
//!
//! The eBPF side is Rust, which has no CO-RE relocations, so the few
//! scheduler fields it reads (see `profiler_common::sched`) are found here
//! and handed over as a load-time global. aya parses BTF but keeps its type
//! table private, and the one maintained BTF crate (btf-rs) is LGPL, so
//! this reads just what it needs of the format
//! (<https://docs.kernel.org/bpf/btf.html>): the type table and the names
//! and offsets of struct and union members.
use std::collections::HashMap;

use profiler_common::{
    process::{MAX_CSS_SUBSYS, ProcessOffsets},
    sched::SchedOffsets,
    unwind::by_file::{FileOffsets, maple},
};

const MAGIC: u16 = 0xeb9f;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_TYPEDEF: u32 = 8;
const KIND_FUNC: u32 = 12;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM: u32 = 6;
const KIND_ENUM64: u32 = 19;

/// Why a field's offset could not be found.
#[derive(Debug, thiserror::Error)]
pub enum BtfFieldError {
    #[error("reading {path}")]
    Read {
        path: &'static str,
        source: std::io::Error,
    },
    #[error("the kernel's BTF is malformed: {0}")]
    Malformed(&'static str),
    #[error("the kernel's BTF has no struct {0}")]
    NoStruct(String),
    #[error("the kernel's BTF has no field {0} ({1})")]
    NoField(String, &'static str),
}

/// One struct or union member: name, type id, offset in bits.
struct Member {
    name: u32,
    ty: u32,
    bit_offset: u32,
}

/// A type of the table, as far as finding members needs.
enum Type {
    Composite {
        name: u32,
        members: Vec<Member>,
    },
    /// typedef, const, volatile, restrict, type tag: the type it qualifies.
    Alias(u32),
    /// A function (kfuncs among them), by name.
    Func(u32),
    /// An enum: the names of its values.
    Enum(Vec<u32>),
    Other,
}

/// The parsed type table: type id `n` is `types[n - 1]`.
pub struct KernelTypes {
    types: Vec<Type>,
    strings: Vec<u8>,
    by_name: HashMap<Vec<u8>, u32>,
}

impl KernelTypes {
    /// The running kernel's types.
    ///
    /// # Errors
    /// When the file cannot be read or is not BTF.
    pub fn from_sys_fs() -> Result<Self, BtfFieldError> {
        let path = "/sys/kernel/btf/vmlinux";
        let data = std::fs::read(path).map_err(|source| BtfFieldError::Read { path, source })?;
        Self::parse(&data)
    }

    /// Parses raw BTF in the machine's byte order.
    ///
    /// # Errors
    /// When `data` is not well-formed BTF.
    pub fn parse(data: &[u8]) -> Result<Self, BtfFieldError> {
        let mut header = Reader::at(data, 0);
        if header.u16()? != MAGIC {
            return Err(BtfFieldError::Malformed(
                "bad magic (or foreign byte order)",
            ));
        }
        let _version_and_flags = header.u16()?;
        let hdr_len = header.u32()? as usize;
        let (type_off, type_len) = (header.u32()? as usize, header.u32()? as usize);
        let (str_off, str_len) = (header.u32()? as usize, header.u32()? as usize);
        let section = |off: usize, len: usize| {
            data.get(hdr_len + off..hdr_len + off + len)
                .ok_or(BtfFieldError::Malformed("a section runs past the end"))
        };
        let strings = section(str_off, str_len)?.to_vec();
        let types = parse_types(section(type_off, type_len)?)?;
        let mut by_name = HashMap::new();
        for (index, ty) in types.iter().enumerate() {
            if let Type::Composite { name, .. } = ty
                && *name != 0
            {
                let id = u32::try_from(index + 1).map_err(|_| too_many())?;
                by_name
                    .entry(string(&strings, *name).to_vec())
                    .or_insert(id);
            }
        }
        Ok(Self {
            types,
            strings,
            by_name,
        })
    }

    /// The byte offset of `path` (`field.field...`) in struct `name`,
    /// looking through anonymous members; `why` says what the field needs.
    ///
    /// # Errors
    /// When the struct or a field on the path is missing.
    pub fn offset(&self, name: &str, path: &str, why: &'static str) -> Result<u32, BtfFieldError> {
        let mut ty = *self
            .by_name
            .get(name.as_bytes())
            .ok_or_else(|| BtfFieldError::NoStruct(name.to_owned()))?;
        let mut bits = 0;
        for field in path.split('.') {
            let (inner_ty, inner_bits) = self
                .member(ty, field.as_bytes())
                .ok_or_else(|| BtfFieldError::NoField(format!("{name}.{path}"), why))?;
            ty = inner_ty;
            bits += inner_bits;
        }
        Ok(bits / 8)
    }

    /// Member `field` of composite type `ty`: its type and bit offset.
    fn member(&self, ty: u32, field: &[u8]) -> Option<(u32, u32)> {
        let Type::Composite { members, .. } = self.get(self.resolve(ty))? else {
            return None;
        };
        members.iter().find_map(|m| {
            if m.name == 0 {
                let (ty, bits) = self.member(m.ty, field)?;
                Some((ty, m.bit_offset + bits))
            } else if string(&self.strings, m.name) == field {
                Some((m.ty, m.bit_offset))
            } else {
                None
            }
        })
    }

    /// The type id of function `name`, if the kernel has one by that name
    /// (how a kfunc call names its callee).
    #[must_use]
    pub fn func_id(&self, name: &str) -> Option<u32> {
        let index = self.types.iter().position(
            |ty| matches!(ty, Type::Func(n) if string(&self.strings, *n) == name.as_bytes()),
        )?;
        u32::try_from(index + 1).ok()
    }

    /// Whether some enum of the kernel has a value named `name` (how a
    /// kernel tells which helpers, map types and attach types it has).
    #[must_use]
    pub fn has_enum_value(&self, name: &str) -> bool {
        self.types.iter().any(|ty| {
            matches!(ty, Type::Enum(values)
                if values.iter().any(|&v| string(&self.strings, v) == name.as_bytes()))
        })
    }

    /// `ty` with typedefs and qualifiers looked through.
    fn resolve(&self, mut ty: u32) -> u32 {
        for _ in 0..32 {
            match self.get(ty) {
                Some(Type::Alias(next)) => ty = *next,
                _ => break,
            }
        }
        ty
    }

    fn get(&self, ty: u32) -> Option<&Type> {
        self.types.get((ty as usize).checked_sub(1)?)
    }

    /// Where `profiler_common::sched` reads the scheduler's accounting,
    /// and where a thread's ids are.
    ///
    /// # Errors
    /// When this kernel lacks one of the fields.
    pub fn sched_offsets(&self) -> Result<SchedOffsets, BtfFieldError> {
        let sched_info = "run-queue accounting needs CONFIG_SCHED_INFO";
        let group = "the CPU's run queue is reached through CONFIG_FAIR_GROUP_SCHED";
        Ok(SchedOffsets {
            run_delay: self.offset("task_struct", "sched_info.run_delay", sched_info)?,
            last_queued: self.offset("task_struct", "sched_info.last_queued", sched_info)?,
            cfs_rq: self.offset("task_struct", "se.cfs_rq", group)?,
            rq: self.offset("cfs_rq", "rq", group)?,
            clock: self.offset("rq", "clock", "the run queue's clock")?,
            pid: self.offset("task_struct", "pid", "the thread id")?,
            tgid: self.offset("task_struct", "tgid", "the process id")?,
            flags: self.offset("task_struct", "flags", "the thread's kind")?,
        })
    }

    /// Where a process's mount namespace, root and set of cgroups are, for
    /// what the kernel reads of a process as it asks for its mappings.
    ///
    /// # Errors
    /// When this kernel lacks one of the fields.
    pub fn process_offsets(&self) -> Result<ProcessOffsets, BtfFieldError> {
        let why = "a new process's mount namespace and root";
        Ok(ProcessOffsets {
            nsproxy: self.offset("task_struct", "nsproxy", why)?,
            mnt_ns: self.offset("nsproxy", "mnt_ns", why)?,
            ns_inum: self.offset("mnt_namespace", "ns.inum", why)?,
            fs: self.offset("task_struct", "fs", why)?,
            root_dentry: self.offset("fs_struct", "root.dentry", why)?,
            d_inode: self.offset("dentry", "d_inode", why)?,
            i_ino: self.offset("inode", "i_ino", why)?,
            d_sb: self.offset("dentry", "d_sb", why)?,
            s_dev: self.offset("super_block", "s_dev", why)?,
            cgroups: self.offset("task_struct", "cgroups", why)?,
            css_subsys: self.offset("css_set", "subsys", why)?,
            // The array's length: up to the member after it.
            css_subsys_len: (self.offset("css_set", "refcount", why)?)
                .saturating_sub(self.offset("css_set", "subsys", why)?)
                .div_euclid(8)
                .min(MAX_CSS_SUBSYS),
        })
    }

    /// Where a mapping's start, end, file offset and file are, and the
    /// file's identity, for the walk of a process not published yet
    /// (`profiler_common::unwind::by_file`).
    ///
    /// # Errors
    /// When this kernel lacks one of the fields.
    pub fn file_offsets(&self) -> Result<FileOffsets, BtfFieldError> {
        let why = "a new process's first samples walked by table";
        Ok(FileOffsets {
            vm_start: self.offset("vm_area_struct", "vm_start", why)?,
            vm_end: self.offset("vm_area_struct", "vm_end", why)?,
            vm_pgoff: self.offset("vm_area_struct", "vm_pgoff", why)?,
            vm_file: self.offset("vm_area_struct", "vm_file", why)?,
            f_inode: self.offset("file", "f_inode", why)?,
            i_ino: self.offset("inode", "i_ino", why)?,
            i_size: self.offset("inode", "i_size", why)?,
            i_mtime_sec: ["i_mtime_sec", "__i_mtime.tv_sec", "i_mtime.tv_sec"]
                .iter()
                .find_map(|path| self.offset("inode", path, why).ok())
                .ok_or_else(|| BtfFieldError::NoField("inode.i_mtime_sec".to_owned(), why))?,
            task_mm: self.offset("task_struct", "mm", why)?,
            mm_root: self.maple_root(why)?,
        })
    }

    /// Where a process's tree of mappings has its root, once the tree's
    /// nodes are checked to be laid out as `by_file::maple` reads them.
    fn maple_root(&self, why: &'static str) -> Result<u32, BtfFieldError> {
        let laid_out = [
            ("maple_range_64", "pivot", maple::PIVOTS_AT),
            ("maple_range_64", "slot", maple::RANGE_64_SLOTS_AT),
            ("maple_arange_64", "pivot", maple::PIVOTS_AT),
            ("maple_arange_64", "slot", maple::ARANGE_64_SLOTS_AT),
        ];
        for (node, field, at) in laid_out {
            if self.offset(node, field, why)? != at {
                return Err(BtfFieldError::Malformed(
                    "the maple tree's nodes are laid out otherwise",
                ));
            }
        }
        self.offset("mm_struct", "mm_mt.ma_root", why)
    }
}

fn too_many() -> BtfFieldError {
    BtfFieldError::Malformed("too many types")
}

/// The type section, one entry per type id from 1.
fn parse_types(section: &[u8]) -> Result<Vec<Type>, BtfFieldError> {
    let mut r = Reader::at(section, 0);
    let mut types = Vec::new();
    while r.pos < section.len() {
        let name = r.u32()?;
        let info = r.u32()?;
        let size_or_type = r.u32()?;
        let vlen = (info & 0xffff) as usize;
        let kind = (info >> 24) & 0x1f;
        let bitfields = info >> 31 != 0;
        types.push(match kind {
            KIND_STRUCT | KIND_UNION => {
                let mut members = Vec::with_capacity(vlen);
                for _ in 0..vlen {
                    let (name, ty, offset) = (r.u32()?, r.u32()?, r.u32()?);
                    let bit_offset = if bitfields {
                        offset & 0x00ff_ffff
                    } else {
                        offset
                    };
                    members.push(Member {
                        name,
                        ty,
                        bit_offset,
                    });
                }
                Type::Composite { name, members }
            }
            KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                Type::Alias(size_or_type)
            }
            KIND_FUNC => Type::Func(name),
            KIND_ENUM | KIND_ENUM64 => {
                let mut values = Vec::with_capacity(vlen);
                for _ in 0..vlen {
                    values.push(r.u32()?);
                    // The value: one u32, or two for ENUM64.
                    r.skip(if kind == KIND_ENUM { 4 } else { 8 })?;
                }
                Type::Enum(values)
            }
            _ => {
                r.skip(trailing_len(kind, vlen)?)?;
                Type::Other
            }
        });
    }
    Ok(types)
}

/// Bytes that follow the common part of a type of `kind` (other than the
/// struct, union and alias kinds handled above).
fn trailing_len(kind: u32, vlen: usize) -> Result<usize, BtfFieldError> {
    Ok(match kind {
        // INT, VAR, DECL_TAG: one u32.
        1 | 14 | 17 => 4,
        // PTR, FWD, FLOAT: nothing.
        2 | 7 | 16 => 0,
        // ARRAY: element type, index type, length.
        3 => 12,
        // FUNC_PROTO: name and type per entry.
        13 => 8 * vlen,
        // DATASEC: three u32s per entry.
        15 => 12 * vlen,
        _ => return Err(BtfFieldError::Malformed("a type of unknown kind")),
    })
}

/// The NUL-terminated string at `offset` of the string section.
fn string(strings: &[u8], offset: u32) -> &[u8] {
    let rest = strings.get(offset as usize..).unwrap_or_default();
    &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]
}

/// Native-endian reads with bounds checks.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn at(data: &'a [u8], pos: usize) -> Self {
        Self { data, pos }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], BtfFieldError> {
        let bytes = self
            .data
            .get(self.pos..self.pos + N)
            .ok_or(BtfFieldError::Malformed("truncated"))?;
        self.pos += N;
        Ok(bytes.try_into().expect("N bytes"))
    }

    fn u16(&mut self) -> Result<u16, BtfFieldError> {
        self.take().map(u16::from_ne_bytes)
    }

    fn u32(&mut self) -> Result<u32, BtfFieldError> {
        self.take().map(u32::from_ne_bytes)
    }

    fn skip(&mut self, n: usize) -> Result<(), BtfFieldError> {
        if self.pos + n > self.data.len() {
            return Err(BtfFieldError::Malformed("truncated"));
        }
        self.pos += n;
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests;

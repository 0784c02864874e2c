//! The JVM's description of itself, read from a live process: the
//! Serviceability Agent's tables (`vmStructs.cpp`) of fields (type, name,
//! offset or a static's address), of types (name, size) and of integer
//! constants. Every offset the profiler uses comes from here, so a JVM
//! version is read as it describes itself, not from a table of ours.
use std::collections::HashMap;

use super::binary::{Jvm, symbol};
use crate::process::memory::{Memory, u64_at};

/// The most entries a table may have before it is taken as not one.
const MAX_ENTRIES: usize = 20_000;

/// Bytes read of a name at once (names are shorter).
const NAME_READ: usize = 96;

#[derive(Debug, thiserror::Error)]
pub enum VmStructsError {
    #[error("reading the JVM's {table} table")]
    Read {
        table: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the JVM's {0} table is not initialised (the JVM is still starting)")]
    NotReady(&'static str),
    #[error("the JVM's {0} table has no end")]
    Unterminated(&'static str),
}

/// A field as the table gives it: an instance field's offset, or a static
/// field's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Offset(u64),
    Address(u64),
}

/// The tables of one JVM process.
#[derive(Debug, Default)]
pub struct VmStructs {
    /// Each field and its C type (`int`, `int16_t`, `address`...).
    fields: HashMap<(String, String), (Field, String)>,
    sizes: HashMap<String, u64>,
    ints: HashMap<String, i64>,
}

impl VmStructs {
    /// Reads the tables of process `memory`, whose `libjvm.so` (`jvm`) is
    /// loaded with `bias`.
    ///
    /// # Errors
    /// When a table cannot be read, is not set yet, or has no end.
    pub fn read(memory: Memory, jvm: &Jvm, bias: u64) -> Result<Self, VmStructsError> {
        let var = |i: usize, table: &'static str| -> Result<u64, VmStructsError> {
            read_u64(memory, jvm.symbols[i].wrapping_add(bias), table)
        };
        let mut names = Names::new(memory);
        let mut tables = Self::default();
        let structs = Table {
            name: "fields",
            start: var(symbol::STRUCTS, "fields")?,
            stride: var(symbol::STRUCT_STRIDE, "fields")?,
        };
        let (type_name, field_name, is_static, offset, address, type_string) = (
            var(symbol::STRUCT_TYPE_NAME, "fields")?,
            var(symbol::STRUCT_FIELD_NAME, "fields")?,
            var(symbol::STRUCT_IS_STATIC, "fields")?,
            var(symbol::STRUCT_OFFSET, "fields")?,
            var(symbol::STRUCT_ADDRESS, "fields")?,
            var(symbol::STRUCT_TYPE_STRING, "fields")?,
        );
        structs.each(memory, type_name, |entry| {
            let ty = names.at(u64_at(entry, type_name)?)?;
            let field = names.at(u64_at(entry, field_name)?)?;
            let static_field = u64_at(entry, is_static)? & 0xffff_ffff != 0;
            let value = if static_field {
                Field::Address(u64_at(entry, address)?)
            } else {
                Field::Offset(u64_at(entry, offset)?)
            };
            let c_type = u64_at(entry, type_string)
                .and_then(|at| names.at(at))
                .unwrap_or_default();
            tables.fields.insert((ty, field), (value, c_type));
            Some(())
        })?;
        let types = Table {
            name: "types",
            start: var(symbol::TYPES, "types")?,
            stride: var(symbol::TYPE_STRIDE, "types")?,
        };
        let (type_name, size) = (
            var(symbol::TYPE_NAME, "types")?,
            var(symbol::TYPE_SIZE, "types")?,
        );
        types.each(memory, type_name, |entry| {
            let ty = names.at(u64_at(entry, type_name)?)?;
            tables.sizes.insert(ty, u64_at(entry, size)?);
            Some(())
        })?;
        let ints = Table {
            name: "int constants",
            start: var(symbol::INTS, "int constants")?,
            stride: var(symbol::INT_STRIDE, "int constants")?,
        };
        let (name, value) = (
            var(symbol::INT_NAME, "int constants")?,
            var(symbol::INT_VALUE, "int constants")?,
        );
        ints.each(memory, name, |entry| {
            let constant = names.at(u64_at(entry, name)?)?;
            #[expect(clippy::cast_possible_truncation, reason = "an int32_t")]
            let value = i64::from((u64_at(entry, value)? as u32).cast_signed());
            tables.ints.insert(constant, value);
            Some(())
        })?;
        Ok(tables)
    }

    /// An instance field's offset in `ty`, under the first of `names` the
    /// table has (fields move and are renamed across versions).
    #[must_use]
    pub fn offset(&self, ty: &str, names: &[&str]) -> Option<u64> {
        names.iter().find_map(|&field| {
            match self.fields.get(&(ty.to_owned(), field.to_owned()))?.0 {
                Field::Offset(o) => Some(o),
                Field::Address(_) => None,
            }
        })
    }

    /// A static field's address.
    #[must_use]
    pub fn address(&self, ty: &str, field: &str) -> Option<u64> {
        match self.fields.get(&(ty.to_owned(), field.to_owned()))?.0 {
            Field::Address(a) => Some(a),
            Field::Offset(_) => None,
        }
    }

    /// A field's C type, as the table spells it.
    #[must_use]
    pub fn c_type(&self, ty: &str, field: &str) -> Option<&str> {
        Some(&self.fields.get(&(ty.to_owned(), field.to_owned()))?.1)
    }

    /// `sizeof(ty)`.
    #[must_use]
    pub fn size(&self, ty: &str) -> Option<u64> {
        self.sizes.get(ty).copied()
    }

    /// An integer constant.
    #[must_use]
    pub fn int(&self, name: &str) -> Option<i64> {
        self.ints.get(name).copied()
    }

    /// Whether the tables name `ty` at all.
    #[must_use]
    pub fn has_type(&self, ty: &str) -> bool {
        self.sizes.contains_key(ty)
    }
}

/// One of the JVM's tables: entries of `stride` bytes from `start`, the
/// last followed by one whose name is null.
struct Table {
    name: &'static str,
    start: u64,
    stride: u64,
}

impl Table {
    /// Calls `each` with every entry's bytes up to the terminating one
    /// (its name, at `name_offset`, null); an entry `each` cannot read is
    /// skipped.
    fn each(
        &self,
        memory: Memory,
        name_offset: u64,
        mut each: impl FnMut(&[u8]) -> Option<()>,
    ) -> Result<(), VmStructsError> {
        const BATCH: usize = 64;
        let stride = usize::try_from(self.stride).unwrap_or(0);
        if self.start == 0 || stride == 0 || stride > 256 {
            return Err(VmStructsError::NotReady(self.name));
        }
        let mut bytes = vec![0u8; stride * BATCH];
        for batch in 0..MAX_ENTRIES / BATCH {
            let at = self.start + (batch * BATCH * stride) as u64;
            read_entries(memory, at, &mut bytes, stride).map_err(|source| {
                VmStructsError::Read {
                    table: self.name,
                    source,
                }
            })?;
            for entry in bytes.chunks_exact(stride) {
                if u64_at(entry, name_offset).unwrap_or(0) == 0 {
                    return Ok(());
                }
                let _ = each(entry);
            }
        }
        Err(VmStructsError::Unterminated(self.name))
    }
}

/// Fills `bytes` with entries from `at`; where the table's end is closer
/// than a whole batch (the end of its mapping), as many entries as can be
/// read, the rest zeroed (so read as the terminator).
fn read_entries(memory: Memory, at: u64, bytes: &mut [u8], stride: usize) -> std::io::Result<()> {
    if memory.read(at, bytes).is_ok() {
        return Ok(());
    }
    bytes.fill(0);
    for (i, entry) in bytes.chunks_exact_mut(stride).enumerate() {
        if let Err(e) = memory.read(at + (i * stride) as u64, entry) {
            return if i == 0 { Err(e) } else { Ok(()) };
        }
    }
    Ok(())
}

/// The tables' names, read once each (type names repeat).
struct Names {
    memory: Memory,
    seen: HashMap<u64, String>,
}

impl Names {
    fn new(memory: Memory) -> Self {
        Self {
            memory,
            seen: HashMap::new(),
        }
    }

    /// The C string at `at`.
    fn at(&mut self, at: u64) -> Option<String> {
        if at == 0 {
            return None;
        }
        if let Some(name) = self.seen.get(&at) {
            return Some(name.clone());
        }
        let name = read_c_string(self.memory, at)?;
        self.seen.insert(at, name.clone());
        Some(name)
    }
}

/// The C string at `at` (at most [`NAME_READ`] bytes; a name near the end
/// of its mapping is read in smaller steps).
pub(super) fn read_c_string(memory: Memory, at: u64) -> Option<String> {
    let mut buf = [0u8; NAME_READ];
    let mut len = NAME_READ;
    while memory.read(at, &mut buf[..len]).is_err() {
        len /= 2;
        if len < 8 {
            return None;
        }
    }
    let end = buf[..len].iter().position(|&b| b == 0)?;
    String::from_utf8(buf[..end].to_vec()).ok()
}

fn read_u64(memory: Memory, at: u64, table: &'static str) -> Result<u64, VmStructsError> {
    let mut word = [0u8; 8];
    memory
        .read(at, &mut word)
        .map_err(|source| VmStructsError::Read { table, source })?;
    Ok(u64::from_le_bytes(word))
}

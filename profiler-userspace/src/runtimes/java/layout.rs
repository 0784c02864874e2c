//! The offsets read of a JVM, from its own tables (`vm_structs.rs`): what
//! the kernel walk reads of code blobs and interpreter frames, where the
//! code cache's heaps are described, and what naming a method reads.
use profiler_common::java::JavaLayout;

use super::{scopes::Encoding, vm_structs::VmStructs};

/// Everything read of one JVM version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The JDK's major version (0: not read).
    pub major: u32,
    /// The walk's offsets (heaps and segment shift set from the code cache).
    pub kernel: JavaLayout,
    pub code_cache: CodeCacheLayout,
    pub names: NameLayout,
    /// The flag table, where the tables describe it.
    pub flags: Option<FlagsLayout>,
}

/// Where a JVM keeps its flags: `JVMFlag::flags` (a static pointer to
/// the table) and `JVMFlag::numFlags` (a static count; both the file's
/// addresses, as [`CodeCacheLayout`]'s), each entry
/// `sizeof(JVMFlag)` bytes with its `_name` and `_addr` (the value's
/// address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlagsLayout {
    pub flags: u64,
    pub count: u64,
    pub size: u64,
    pub name: u64,
    pub address: u64,
}

/// Where the code cache's heaps are described. Statics are the file's
/// addresses (the tables give them relocated: less the load bias of the
/// process they were read from), so a layout serves every process of the
/// same `libjvm.so`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeCacheLayout {
    /// `CodeCache::_heaps`, a static `GrowableArray<CodeHeap*>*`.
    pub heaps: u64,
    /// `CodeCache::_low_bound` and `_high_bound`, statics.
    pub low_bound: u64,
    pub high_bound: u64,
    /// The array's length (`GrowableArrayBase::_len`) and elements
    /// (`GrowableArray<int>::_data`).
    pub array_len: u64,
    pub array_data: u64,
    /// `CodeHeap::_memory` and `_segmap` (`VirtualSpace`s), and
    /// `_log2_segment_size`.
    pub heap_memory: u64,
    pub heap_segmap: u64,
    pub heap_segment_shift: u64,
    /// `VirtualSpace::_low`, and `_high_boundary`: a heap commits memory
    /// as it grows, up to the boundary it reserved at start.
    pub space_low: u64,
    pub space_high: u64,
}

/// What naming a Java method reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameLayout {
    /// `nmethod::_method` (`CompiledMethod::_method` before JDK 23).
    pub nmethod_method: u64,
    pub nmethod_compile_id: u64,
    pub method_const_method: u64,
    pub const_method_constants: u64,
    pub const_method_name_index: u64,
    pub const_method_signature_index: u64,
    pub constant_pool_holder: u64,
    pub constant_pool_source_file: u64,
    /// `sizeof(ConstantPool)`: its entries follow it.
    pub constant_pool_size: u64,
    pub klass_name: u64,
    pub symbol_length: u64,
    pub symbol_body: u64,
    /// `ConstMethod::_flags` (2 bytes, from JDK 21 4), the flag that says
    /// it has a line number table, `_code_size` (2 bytes),
    /// `_constMethod_size` (an `int`, in words) and `sizeof(ConstMethod)`:
    /// the bytecodes follow it, and the line number table them.
    pub const_method_flags: u64,
    pub const_method_flags_wide: bool,
    pub has_line_table: u32,
    pub const_method_code_size: u64,
    pub const_method_words: u64,
    pub const_method_size: u64,
    /// How the JVM writes its compressed integers (scopes, line tables).
    pub encoding: Encoding,
    /// Where a compiled method's inlining is recorded; `None` for a JVM
    /// whose layout of it is not known here (JDK 23 and 24): its compiled
    /// frames are named after the compiled method alone.
    pub scopes: Option<Scopes>,
}

/// Where an `nmethod` keeps its `PcDesc`s, scopes data and metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scopes {
    pub regions: ScopeRegions,
    /// `sizeof(PcDesc)`, its `_pc_offset` and `_scope_decode_offset`.
    pub pc_desc_size: u64,
    pub pc_desc_pc: u64,
    pub pc_desc_scope: u64,
}

/// The regions, by JDK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScopeRegions {
    /// JDK 8 to 22, inside the `nmethod`: metadata at `_metadata_offset`,
    /// scopes data at `_scopes_data_begin` (an address), `PcDesc`s from
    /// `_scopes_pcs_offset` to `_dependencies_offset`.
    Embedded {
        scopes_data: u64,
        metadata_offset: u64,
        pcs_offset: u64,
        pcs_end_offset: u64,
    },
    /// JDK 25 and later: `PcDesc`s then scopes data in the immutable data
    /// (`_immutable_data`, its `_immutable_data_size`), from
    /// `_scopes_pcs_offset` and `_scopes_data_offset`; metadata in the
    /// mutable data (`CodeBlob::_mutable_data`, `_mutable_data_size`)
    /// after the relocations (`_relocation_size`).
    Split {
        immutable_data: u64,
        immutable_size: u64,
        pcs_offset: u64,
        scopes_offset: u64,
        mutable_data: u64,
        mutable_size: u64,
        relocation_size: u64,
    },
}

#[derive(Debug, thiserror::Error)]
#[error("the JVM's tables lack {0}")]
pub struct Missing(pub &'static str);

impl Layout {
    /// The layout the JVM's `tables` describe, of JDK `major`, read from a
    /// process whose `libjvm.so` is loaded with `bias`.
    ///
    /// # Errors
    /// When a field or type read is not in them (a JVM version whose
    /// structures this build does not know).
    pub fn of(tables: &VmStructs, major: u32, bias: u64) -> Result<Self, Missing> {
        let kernel = kernel(tables)?;
        let mut names = names(tables, &kernel)?;
        // JDK 20 moved to UNSIGNED5 with the byte 0 excluded (JDK-8298425).
        names.encoding = Encoding {
            excluded: u8::from(major >= 20),
        };
        Ok(Self {
            major,
            kernel,
            code_cache: code_cache(tables, bias)?,
            names,
            flags: flags(tables, bias),
        })
    }
}

/// The field `names` (the first the tables have) of `ty`, or `what` is
/// missing.
fn field(tables: &VmStructs, ty: &str, names: &[&str], what: &'static str) -> Result<u64, Missing> {
    tables.offset(ty, names).ok_or(Missing(what))
}

fn size(tables: &VmStructs, ty: &'static str) -> Result<u64, Missing> {
    tables.size(ty).ok_or(Missing(ty))
}

fn kernel(tables: &VmStructs) -> Result<JavaLayout, Missing> {
    let (code_begin, code_is_offset) = match tables.offset("CodeBlob", &["_code_begin"]) {
        Some(at) => (at, false),
        None => (
            field(
                tables,
                "CodeBlob",
                &["_code_offset"],
                "CodeBlob::_code_offset",
            )?,
            true,
        ),
    };
    let blob = |name: &'static str, what| narrow(field(tables, "CodeBlob", &[name], what)?);
    Ok(JavaLayout {
        blob_name: blob("_name", "CodeBlob::_name")?,
        blob_frame_size: blob("_frame_size", "CodeBlob::_frame_size")?,
        blob_frame_complete: blob("_frame_complete_offset", "CodeBlob::_frame_complete_offset")?,
        blob_code_begin: narrow(code_begin)?,
        nmethod_compile_id: narrow(field(
            tables,
            "nmethod",
            &["_compile_id"],
            "nmethod::_compile_id",
        )?)?,
        method_const_method: narrow(field(
            tables,
            "Method",
            &["_constMethod"],
            "Method::_constMethod",
        )?)?,
        const_method_size: narrow(size(tables, "ConstMethod")?)?,
        heap_block_size: narrow(size(tables, "HeapBlock")?)?,
        segment_shift: 0,
        heaps: 0,
        blob_code_is_offset: u8::from(code_is_offset),
        blob_frame_complete_16: u8::from(
            tables.c_type("CodeBlob", "_frame_complete_offset") == Some("int16_t"),
        ),
        pad: [0; 4],
    })
}

fn code_cache(tables: &VmStructs, bias: u64) -> Result<CodeCacheLayout, Missing> {
    let stat = |name: &'static str, what| {
        tables
            .address("CodeCache", name)
            .map(|a| a.wrapping_sub(bias))
            .ok_or(Missing(what))
    };
    let heap = |name: &'static str, what| field(tables, "CodeHeap", &[name], what);
    Ok(CodeCacheLayout {
        heaps: stat("_heaps", "CodeCache::_heaps")?,
        low_bound: stat("_low_bound", "CodeCache::_low_bound")?,
        high_bound: stat("_high_bound", "CodeCache::_high_bound")?,
        array_len: field(
            tables,
            "GrowableArrayBase",
            &["_len"],
            "GrowableArrayBase::_len",
        )?,
        array_data: field(
            tables,
            "GrowableArray<int>",
            &["_data"],
            "GrowableArray<int>::_data",
        )?,
        heap_memory: heap("_memory", "CodeHeap::_memory")?,
        heap_segmap: heap("_segmap", "CodeHeap::_segmap")?,
        heap_segment_shift: heap("_log2_segment_size", "CodeHeap::_log2_segment_size")?,
        space_low: field(tables, "VirtualSpace", &["_low"], "VirtualSpace::_low")?,
        space_high: field(
            tables,
            "VirtualSpace",
            &["_high_boundary"],
            "VirtualSpace::_high_boundary",
        )?,
    })
}

fn names(tables: &VmStructs, kernel: &JavaLayout) -> Result<NameLayout, Missing> {
    // `CompiledMethod` was folded into `nmethod` in JDK 23.
    let nmethod_type = if tables.has_type("CompiledMethod") {
        "CompiledMethod"
    } else {
        "nmethod"
    };
    let const_method = |names: &[&str], what| field(tables, "ConstMethod", names, what);
    let pool = |name: &'static str, what| field(tables, "ConstantPool", &[name], what);
    Ok(NameLayout {
        nmethod_method: field(tables, nmethod_type, &["_method"], "nmethod::_method")?,
        nmethod_compile_id: u64::from(kernel.nmethod_compile_id),
        method_const_method: u64::from(kernel.method_const_method),
        const_method_constants: const_method(&["_constants"][..], "ConstMethod::_constants")?,
        const_method_name_index: const_method(&["_name_index"][..], "ConstMethod::_name_index")?,
        const_method_signature_index: const_method(
            &["_signature_index"][..],
            "ConstMethod::_signature_index",
        )?,
        constant_pool_holder: pool("_pool_holder", "ConstantPool::_pool_holder")?,
        constant_pool_source_file: pool(
            "_source_file_name_index",
            "ConstantPool::_source_file_name_index",
        )?,
        constant_pool_size: size(tables, "ConstantPool")?,
        klass_name: field(tables, "Klass", &["_name"], "Klass::_name")?,
        symbol_length: field(tables, "Symbol", &["_length"], "Symbol::_length")?,
        symbol_body: field(tables, "Symbol", &["_body"], "Symbol::_body")?,
        const_method_flags: const_method(&["_flags", "_flags._flags"][..], "ConstMethod::_flags")?,
        const_method_flags_wide: tables.offset("ConstMethod", &["_flags._flags"]).is_some(),
        has_line_table: tables
            .int("ConstMethod::_has_linenumber_table")
            .or_else(|| tables.int("ConstMethodFlags::_misc_has_linenumber_table"))
            .and_then(|v| u32::try_from(v).ok())
            .ok_or(Missing("ConstMethod's line number table flag"))?,
        const_method_code_size: const_method(&["_code_size"][..], "ConstMethod::_code_size")?,
        const_method_words: const_method(
            &["_constMethod_size"][..],
            "ConstMethod::_constMethod_size",
        )?,
        const_method_size: u64::from(kernel.const_method_size),
        encoding: Encoding::default(),
        scopes: scopes(tables, nmethod_type),
    })
}

fn flags(tables: &VmStructs, bias: u64) -> Option<FlagsLayout> {
    Some(FlagsLayout {
        flags: tables.address("JVMFlag", "flags")?.wrapping_sub(bias),
        count: tables.address("JVMFlag", "numFlags")?.wrapping_sub(bias),
        size: tables.size("JVMFlag")?,
        name: tables.offset("JVMFlag", &["_name"])?,
        address: tables.offset("JVMFlag", &["_addr"])?,
    })
}

/// Where inlining is recorded, if the tables say in a layout known here.
fn scopes(tables: &VmStructs, nmethod_type: &str) -> Option<Scopes> {
    let nmethod = |name| tables.offset("nmethod", &[name]);
    let blob = |name| tables.offset("CodeBlob", &[name]);
    let embedded = || {
        Some(ScopeRegions::Embedded {
            scopes_data: tables.offset(nmethod_type, &["_scopes_data_begin"])?,
            metadata_offset: nmethod("_metadata_offset")?,
            pcs_offset: nmethod("_scopes_pcs_offset")?,
            pcs_end_offset: nmethod("_dependencies_offset")?,
        })
    };
    let split = || {
        Some(ScopeRegions::Split {
            immutable_data: nmethod("_immutable_data")?,
            immutable_size: nmethod("_immutable_data_size")?,
            pcs_offset: nmethod("_scopes_pcs_offset")?,
            scopes_offset: nmethod("_scopes_data_offset")?,
            mutable_data: blob("_mutable_data")?,
            mutable_size: blob("_mutable_data_size")?,
            relocation_size: blob("_relocation_size")?,
        })
    };
    Some(Scopes {
        regions: embedded().or_else(split)?,
        pc_desc_size: tables.size("PcDesc")?,
        pc_desc_pc: tables.offset("PcDesc", &["_pc_offset"])?,
        pc_desc_scope: tables.offset("PcDesc", &["_scope_decode_offset"])?,
    })
}

/// An offset the kernel reads as a `u16`.
fn narrow(offset: u64) -> Result<u16, Missing> {
    u16::try_from(offset).map_err(|_| Missing("an offset below 64 KiB"))
}

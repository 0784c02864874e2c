//! Which files are HotSpot JVMs: a `libjvm.so` that exports the tables
//! the Serviceability Agent reads (`gHotSpotVMStructs` and the rest), each
//! a pointer or an entry offset the JVM sets when it loads.
use object::{Object as _, ObjectSymbol as _};

use crate::runtimes::segments::Segments;

/// The exported variables read, in [`Jvm::symbols`]' order.
pub const SYMBOLS: [&str; 16] = [
    "gHotSpotVMStructs",
    "gHotSpotVMStructEntryArrayStride",
    "gHotSpotVMStructEntryTypeNameOffset",
    "gHotSpotVMStructEntryFieldNameOffset",
    "gHotSpotVMStructEntryIsStaticOffset",
    "gHotSpotVMStructEntryOffsetOffset",
    "gHotSpotVMStructEntryAddressOffset",
    "gHotSpotVMStructEntryTypeStringOffset",
    "gHotSpotVMTypes",
    "gHotSpotVMTypeEntryArrayStride",
    "gHotSpotVMTypeEntryTypeNameOffset",
    "gHotSpotVMTypeEntrySizeOffset",
    "gHotSpotVMIntConstants",
    "gHotSpotVMIntConstantEntryArrayStride",
    "gHotSpotVMIntConstantEntryNameOffset",
    "gHotSpotVMIntConstantEntryValueOffset",
];

/// Indexes into [`Jvm::symbols`].
pub mod symbol {
    pub const STRUCTS: usize = 0;
    pub const STRUCT_STRIDE: usize = 1;
    pub const STRUCT_TYPE_NAME: usize = 2;
    pub const STRUCT_FIELD_NAME: usize = 3;
    pub const STRUCT_IS_STATIC: usize = 4;
    pub const STRUCT_OFFSET: usize = 5;
    pub const STRUCT_ADDRESS: usize = 6;
    pub const STRUCT_TYPE_STRING: usize = 7;
    pub const TYPES: usize = 8;
    pub const TYPE_STRIDE: usize = 9;
    pub const TYPE_NAME: usize = 10;
    pub const TYPE_SIZE: usize = 11;
    pub const INTS: usize = 12;
    pub const INT_STRIDE: usize = 13;
    pub const INT_NAME: usize = 14;
    pub const INT_VALUE: usize = 15;
}

/// A HotSpot `libjvm.so`: addresses are the file's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jvm {
    /// The addresses of [`SYMBOLS`], in order.
    pub symbols: [u64; SYMBOLS.len()],
    segments: Segments,
}

impl Jvm {
    /// What to add to the file's addresses in a process that maps its
    /// file offset `offset` at `start`.
    #[must_use]
    pub fn bias(&self, offset: u64, start: u64) -> Option<u64> {
        self.segments.bias(offset, start)
    }
}

/// The JVM in the ELF file `data`, if it is one: every variable of
/// [`SYMBOLS`] exported.
#[must_use]
pub fn recognise(data: &[u8]) -> Option<Jvm> {
    let file = object::File::parse(data).ok()?;
    let mut symbols = [0u64; SYMBOLS.len()];
    for s in file.dynamic_symbols() {
        let Ok(name) = s.name() else { continue };
        // Versioned in some builds (`@@SUNWprivate_1.1`).
        let name = name.split('@').next().unwrap_or(name);
        if let Some(i) = SYMBOLS.iter().position(|&n| n == name)
            && s.address() != 0
            && symbols[i] == 0
        {
            symbols[i] = s.address();
        }
    }
    symbols.iter().all(|&a| a != 0).then(|| Jvm {
        symbols,
        segments: Segments::of(&file),
    })
}

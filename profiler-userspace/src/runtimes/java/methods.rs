//! Java methods named from a JVM's memory: a `Method*` leads to its
//! `ConstMethod` (name and signature indexes), its constant pool (the
//! symbols, the source file) and its class (the class's name).
//!
//! A compiled frame's PC gives the methods inlined there and their lines
//! (`scopes.rs`). What the walk recorded is checked before it is named: a
//! compiled frame
//! by its `nmethod`'s compilation id (a freed `nmethod` whose memory holds
//! another compilation is not named after it), an interpreted frame by its
//! method's `ConstMethod*`.
use std::sync::Arc;

use super::{
    aged::Aged,
    layout::{NameLayout, ScopeRegions},
    scopes::{self, Encoding, PcDesc},
};
use crate::process::memory::Memory;

/// The longest symbol read (a longer name is cut).
const SYMBOL_MAX: usize = 512;

/// The largest region of a method read (debug information, line table).
const REGION_MAX: usize = 4 << 20;

/// A Java method's names, and its line number table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JavaMethod {
    /// The class, with dots (`java.lang.Thread`).
    pub class: String,
    pub name: String,
    /// The class's source file (`Thread.java`), when it was compiled with
    /// one.
    pub source: Option<String>,
    /// The compressed line number table (empty: none).
    lines: Vec<u8>,
    encoding: Encoding,
}

impl JavaMethod {
    /// `class.name`, as JFR and async-profiler name a frame.
    #[must_use]
    pub fn function(&self) -> String {
        format!("{}.{}", self.class, self.name)
    }

    /// The source line of bytecode index `bci` (0: unknown).
    #[must_use]
    pub fn line(&self, bci: i32) -> u32 {
        if bci < 0 {
            return self.line(0);
        }
        scopes::line_of(&self.lines, bci, self.encoding).unwrap_or(0)
    }
}

/// A Java frame as named: its method and line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JavaFrame {
    pub method: Arc<JavaMethod>,
    pub line: u32,
}

/// An `nmethod`'s regions, each `[start, end)`.
struct Regions {
    metadata: (u64, u64),
    scopes: (u64, u64),
    pcs: (u64, u64),
}

/// What naming a compiled method's frames reads of it, once.
struct Compiled {
    method: u64,
    pcs: Vec<PcDesc>,
    scopes: Vec<u8>,
    metadata: Vec<u64>,
}

/// A compiled frame's methods, innermost first, and whether they are
/// approximate: taken from a debug point that is not the frame's own.
/// A caller's own point is the one HotSpot records at its return address;
/// a leaf's, the point ending at its instruction, or any point of a JVM
/// that records them between safepoints too (`-XX:+DebugNonSafepoints`:
/// then the next point describes every instruction since the previous
/// one). Without that flag a leaf takes the next safepoint's methods, as
/// JFR does.
#[derive(Debug)]
pub struct CompiledFrames {
    pub frames: Vec<JavaFrame>,
    pub approximate: bool,
}

/// Names the methods of one JVM process, each read once.
pub struct Namer {
    memory: Memory,
    layout: NameLayout,
    /// Whether the JVM records debug points between safepoints.
    debug_non_safepoints: bool,
    /// By `Method*` and its `ConstMethod*` (a class unloaded and another
    /// method at the same address has another `ConstMethod`).
    methods: Aged<(u64, u64), Option<Arc<JavaMethod>>>,
    compiled: Aged<(u64, u32), Option<Arc<Compiled>>>,
}

impl Namer {
    #[must_use]
    pub fn new(pid: u32, layout: NameLayout, debug_non_safepoints: bool) -> Self {
        Self {
            memory: Memory { pid },
            layout,
            debug_non_safepoints,
            methods: Aged::default(),
            compiled: Aged::default(),
        }
    }

    /// A window ends: what the last windows did not ask for goes.
    pub fn end_window(&mut self) {
        self.methods.end_window();
        self.compiled.end_window();
    }

    /// The frames of the compiled frame recorded as `nmethod` with
    /// `compile_id` with its instruction at `pc_offset` from its code's
    /// start (see `UserFrame::JavaCompiled`), innermost first:
    /// the methods inlined there, each its own frame, then the compiled
    /// method; `None` when that compilation is gone or unreadable.
    pub fn compiled(
        &mut self,
        nmethod: u64,
        compile_id: u32,
        pc_offset: u32,
    ) -> Option<CompiledFrames> {
        let compiled = self.compiled_info(nmethod, compile_id)?;
        if let Some((frames, own_point)) = self.inlined(&compiled, pc_offset) {
            return Some(CompiledFrames {
                frames,
                approximate: !own_point && !self.debug_non_safepoints,
            });
        }
        // No scope to read: the compiled method alone, exact only when it
        // records no debug point at all (a native method's wrapper).
        let method = self.method(compiled.method)?;
        Some(CompiledFrames {
            frames: vec![JavaFrame { method, line: 0 }],
            approximate: self.layout.scopes.is_none() || !compiled.pcs.is_empty(),
        })
    }

    /// The frame of the interpreted frame recorded as `method` at `bci`
    /// with the check of its `ConstMethod*`; `None` when it no longer
    /// matches.
    pub fn interpreted(&mut self, method: u64, const_method: u32, bci: u32) -> Option<JavaFrame> {
        let now = self.u64(method + self.layout.method_const_method)?;
        #[expect(clippy::cast_possible_truncation, reason = "the check is truncated")]
        let check = (now >> 3) as u32;
        if check != const_method {
            return None;
        }
        let method = self.method(method)?;
        let line = i32::try_from(bci).map_or(0, |bci| method.line(bci));
        Some(JavaFrame { method, line })
    }

    /// The scopes at `pc_offset`, innermost first, named, and whether
    /// their debug point is the instruction's own (it ends there).
    fn inlined(&mut self, compiled: &Compiled, pc_offset: u32) -> Option<(Vec<JavaFrame>, bool)> {
        let desc = scopes::pc_desc_for(&compiled.pcs, pc_offset)?;
        let own_point = i64::from(desc.pc_offset) == i64::from(pc_offset) + 1;
        let chain = scopes::scope_chain(&compiled.scopes, desc.scope, self.layout.encoding);
        if chain.is_empty() {
            return None;
        }
        let frames = chain
            .iter()
            .map(|&(index, bci)| {
                let at = usize::try_from(index.checked_sub(1)?).ok()?;
                let method = self.method(*compiled.metadata.get(at)?)?;
                let line = method.line(bci);
                Some(JavaFrame { method, line })
            })
            .collect::<Option<Vec<_>>>()?;
        Some((frames, own_point))
    }

    fn compiled_info(&mut self, nmethod: u64, compile_id: u32) -> Option<Arc<Compiled>> {
        if let Some(known) = self.compiled.get(&(nmethod, compile_id)) {
            return known;
        }
        let id = self.u32(nmethod + self.layout.nmethod_compile_id)?;
        if id != compile_id {
            return None;
        }
        let read = self.read_compiled(nmethod).map(Arc::new);
        self.compiled.insert((nmethod, compile_id), read.clone());
        read
    }

    fn read_compiled(&self, nmethod: u64) -> Option<Compiled> {
        let method = self.u64(nmethod + self.layout.nmethod_method)?;
        let mut compiled = Compiled {
            method,
            pcs: Vec::new(),
            scopes: Vec::new(),
            metadata: Vec::new(),
        };
        let Some(l) = self.layout.scopes else {
            return Some(compiled);
        };
        let regions = self.regions(nmethod, l.regions)?;
        let metadata = self.bytes(regions.metadata.0, regions.metadata.1)?;
        compiled.metadata = metadata
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
            .collect();
        compiled.scopes = self.bytes(regions.scopes.0, regions.scopes.1)?;
        let size = usize::try_from(l.pc_desc_size).ok()?.max(8);
        compiled.pcs = self
            .bytes(regions.pcs.0, regions.pcs.1)?
            .chunks_exact(size)
            .filter_map(|d| {
                let at = |o: u64| {
                    let o = usize::try_from(o).ok()?;
                    Some(u32::from_le_bytes(d.get(o..o + 4)?.try_into().ok()?))
                };
                Some(PcDesc {
                    pc_offset: at(l.pc_desc_pc)?.cast_signed(),
                    scope: at(l.pc_desc_scope)?,
                })
            })
            .collect();
        Some(compiled)
    }

    /// Where `nmethod`'s metadata, scopes data and `PcDesc`s lie.
    fn regions(&self, nmethod: u64, layout: ScopeRegions) -> Option<Regions> {
        let int = |field: u64| Some(u64::from(self.u32(nmethod + field)?));
        Some(match layout {
            ScopeRegions::Embedded {
                scopes_data,
                metadata_offset,
                pcs_offset,
                pcs_end_offset,
            } => {
                let scopes = self.u64(nmethod + scopes_data)?;
                let pcs = nmethod + int(pcs_offset)?;
                Regions {
                    metadata: (nmethod + int(metadata_offset)?, scopes),
                    scopes: (scopes, pcs),
                    pcs: (pcs, nmethod + int(pcs_end_offset)?),
                }
            }
            ScopeRegions::Split {
                immutable_data,
                immutable_size,
                pcs_offset,
                scopes_offset,
                mutable_data,
                mutable_size,
                relocation_size,
            } => {
                let immutable = self.u64(nmethod + immutable_data)?;
                let mutable = self.u64(nmethod + mutable_data)?;
                let scopes = immutable + int(scopes_offset)?;
                Regions {
                    metadata: (
                        mutable + int(relocation_size)?,
                        mutable + int(mutable_size)?,
                    ),
                    scopes: (scopes, immutable + int(immutable_size)?),
                    pcs: (immutable + int(pcs_offset)?, scopes),
                }
            }
        })
    }

    fn method(&mut self, method: u64) -> Option<Arc<JavaMethod>> {
        let const_method = self.u64(method + self.layout.method_const_method)?;
        if let Some(known) = self.methods.get(&(method, const_method)) {
            return known;
        }
        let read = self.read_method(const_method).map(Arc::new);
        self.methods.insert((method, const_method), read.clone());
        read
    }

    /// The names of the method whose `ConstMethod` is at `const_method`.
    fn read_method(&self, const_method: u64) -> Option<JavaMethod> {
        let l = &self.layout;
        let pool = self.u64(const_method + l.const_method_constants)?;
        let name_index = self.u16(const_method + l.const_method_name_index)?;
        let holder = self.u64(pool + l.constant_pool_holder)?;
        let class = self.symbol(self.u64(holder + l.klass_name)?)?;
        let name = self.symbol(self.pool_entry(pool, name_index)?)?;
        let source = self
            .u16(pool + l.constant_pool_source_file)
            .filter(|&i| i != 0)
            .and_then(|i| self.symbol(self.pool_entry(pool, i)?));
        Some(JavaMethod {
            class: class.replace('/', "."),
            name,
            source,
            lines: self.line_table(const_method).unwrap_or_default(),
            encoding: self.layout.encoding,
        })
    }

    /// The line number table of the `ConstMethod` at `at`: after its
    /// bytecodes, within its size.
    fn line_table(&self, at: u64) -> Option<Vec<u8>> {
        let l = &self.layout;
        let flags = if l.const_method_flags_wide {
            self.u32(at + l.const_method_flags)?
        } else {
            u32::from(self.u16(at + l.const_method_flags)?)
        };
        if flags & l.has_line_table == 0 {
            return None;
        }
        let code_size = u64::from(self.u16(at + l.const_method_code_size)?);
        let end = at + 8 * u64::from(self.u32(at + l.const_method_words)?);
        self.bytes(at + l.const_method_size + code_size, end)
    }

    /// The bytes `[from, to)`, at most [`REGION_MAX`].
    fn bytes(&self, from: u64, to: u64) -> Option<Vec<u8>> {
        let len = usize::try_from(to.checked_sub(from)?).ok()?;
        if len > REGION_MAX {
            return None;
        }
        let mut bytes = vec![0u8; len];
        self.memory.read(from, &mut bytes).ok()?;
        Some(bytes)
    }

    /// The `Symbol*` at index `i` of the constant pool at `pool`.
    fn pool_entry(&self, pool: u64, i: u16) -> Option<u64> {
        self.u64(pool + self.layout.constant_pool_size + 8 * u64::from(i))
    }

    /// The text of the `Symbol` at `at`.
    fn symbol(&self, at: u64) -> Option<String> {
        let len = usize::from(self.u16(at + self.layout.symbol_length)?).min(SYMBOL_MAX);
        let mut bytes = vec![0u8; len];
        self.memory
            .read(at + self.layout.symbol_body, &mut bytes)
            .ok()?;
        // Modified UTF-8; the names of real classes are plain UTF-8.
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn u64(&self, at: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        self.memory.read(at, &mut b).ok()?;
        Some(u64::from_le_bytes(b))
    }

    fn u32(&self, at: u64) -> Option<u32> {
        let mut b = [0u8; 4];
        self.memory.read(at, &mut b).ok()?;
        Some(u32::from_le_bytes(b))
    }

    fn u16(&self, at: u64) -> Option<u16> {
        let mut b = [0u8; 2];
        self.memory.read(at, &mut b).ok()?;
        Some(u16::from_le_bytes(b))
    }
}

//! Naming against structures laid out in this test's own memory (read
//! with `process_vm_readv` on itself, as the daemon reads a JVM): a
//! compiled frame's inlined methods and lines, and no name at all for a
//! compilation or method that is not the one the walk recorded.
use super::{
    Namer,
    layout::{NameLayout, ScopeRegions, Scopes},
    scopes::Encoding,
};

const LAYOUT: NameLayout = NameLayout {
    nmethod_method: 16,
    nmethod_compile_id: 24,
    method_const_method: 8,
    const_method_constants: 8,
    const_method_name_index: 16,
    const_method_signature_index: 18,
    constant_pool_holder: 16,
    constant_pool_source_file: 24,
    constant_pool_size: 32,
    klass_name: 8,
    symbol_length: 4,
    symbol_body: 6,
    const_method_flags: 20,
    const_method_flags_wide: false,
    has_line_table: 1,
    const_method_code_size: 22,
    const_method_words: 24,
    const_method_size: 32,
    encoding: Encoding { excluded: 1 },
    scopes: Some(Scopes {
        regions: ScopeRegions::Embedded {
            scopes_data: 40,
            metadata_offset: 32,
            pcs_offset: 48,
            pcs_end_offset: 52,
        },
        pc_desc_size: 16,
        pc_desc_pc: 0,
        pc_desc_scope: 4,
    }),
};

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

fn address<T>(buf: &[T]) -> u64 {
    buf.as_ptr() as u64
}

/// A `Symbol` holding `text`.
fn symbol(text: &str) -> Vec<u8> {
    let mut s = vec![0u8; 6 + text.len()];
    put(&mut s, 4, &u16::try_from(text.len()).unwrap().to_le_bytes());
    put(&mut s, 6, text.as_bytes());
    s
}

/// One JVM's worth of structures: two methods of class `demo/Service`
/// (`outer`, and `inner` inlined into it), each with a line table, and an
/// `nmethod` of `outer` whose one `PcDesc` (at PC offset 0x40) has the
/// scopes inner (bytecode index 2) in outer (index 5).
struct Jvm {
    symbols: Vec<Vec<u8>>,
    klass: Vec<u8>,
    pool: Vec<u8>,
    const_methods: Vec<Vec<u8>>,
    methods: Vec<Vec<u8>>,
    nmethod: Vec<u8>,
}

impl Jvm {
    fn new() -> Box<Self> {
        let mut jvm = Box::new(Self {
            symbols: ["demo/Service", "outer", "inner", "Service.java"]
                .iter()
                .map(|t| symbol(t))
                .collect(),
            klass: vec![0; 16],
            pool: vec![0; 32 + 8 * 4],
            const_methods: vec![vec![0; 64], vec![0; 64]],
            methods: vec![vec![0; 16], vec![0; 16]],
            nmethod: vec![0; 160],
        });
        put(&mut jvm.klass, 8, &address(&jvm.symbols[0]).to_le_bytes());
        put(&mut jvm.pool, 16, &address(&jvm.klass).to_le_bytes());
        put(&mut jvm.pool, 24, &3u16.to_le_bytes());
        for i in 1..4 {
            let at = address(&jvm.symbols[i]);
            put(&mut jvm.pool, 32 + 8 * i, &at.to_le_bytes());
        }
        // Lines: bytecode 0 at line 10, 2 at 11, 5 at 12 (short pairs),
        // after 4 bytes of bytecode.
        for (i, name_index) in [(0usize, 1u16), (1, 2)] {
            let pool = address(&jvm.pool);
            let cm = &mut jvm.const_methods[i];
            put(cm, 8, &pool.to_le_bytes());
            put(cm, 16, &name_index.to_le_bytes());
            put(cm, 20, &1u16.to_le_bytes());
            put(cm, 22, &4u16.to_le_bytes());
            put(cm, 24, &8u32.to_le_bytes());
            put(cm, 36, &[0xff, 1, 21, 2 << 3 | 1, 3 << 3 | 1, 0]);
            let at = address(&jvm.const_methods[i]);
            put(&mut jvm.methods[i], 8, &at.to_le_bytes());
        }
        let (outer, inner) = (address(&jvm.methods[0]), address(&jvm.methods[1]));
        let nm = address(&jvm.nmethod);
        let n = &mut jvm.nmethod;
        put(n, 16, &outer.to_le_bytes());
        put(n, 24, &7u32.to_le_bytes());
        // Metadata at 64 (outer, inner), scopes at 80, PcDescs at 96.
        put(n, 32, &64u32.to_le_bytes());
        put(n, 40, &(nm + 80).to_le_bytes());
        put(n, 48, &96u32.to_le_bytes());
        put(n, 52, &128u32.to_le_bytes());
        put(n, 64, &outer.to_le_bytes());
        put(n, 72, &inner.to_le_bytes());
        // Each scope: sender, method index, bytecode index + 1, each
        // byte stored plus one (JDK 20's encoding). Outer at scope 1,
        // inner at scope 4.
        put(n, 80, &[0, 1, 2, 7, 2, 3, 4]);
        put(n, 96, &(-1i32).to_le_bytes());
        put(n, 112, &0x40u32.to_le_bytes());
        put(n, 116, &4u32.to_le_bytes());
        jvm
    }

    fn nmethod(&self) -> u64 {
        address(&self.nmethod)
    }
}

fn names(frames: &[super::JavaFrame]) -> Vec<(String, String, u32)> {
    frames
        .iter()
        .map(|f| {
            (
                f.method.function(),
                f.method.source.clone().unwrap_or_default(),
                f.line,
            )
        })
        .collect()
}

#[test]
fn a_compiled_frame_names_the_methods_inlined_at_its_pc_with_their_lines() {
    let jvm = Jvm::new();
    let mut namer = Namer::new(std::process::id(), LAYOUT, false);
    // A call whose return address has the PcDesc.
    let at_call = namer.compiled(jvm.nmethod(), 7, 0x3f).unwrap();
    assert!(!at_call.approximate, "the call's own point");
    let frames = at_call.frames;
    assert_eq!(
        names(&frames),
        [
            ("demo.Service.inner".into(), "Service.java".into(), 11),
            ("demo.Service.outer".into(), "Service.java".into(), 12),
        ]
    );
    // A sampled PC between recorded points takes the next one, as JFR
    // does; the instruction at the recorded point is the next one's.
    let between = namer.compiled(jvm.nmethod(), 7, 0x3a).unwrap();
    assert_eq!(names(&between.frames), names(&frames));
    assert!(between.approximate, "the next point's, not its own");
    let next = namer.compiled(jvm.nmethod(), 7, 0x40).unwrap();
    assert_eq!(
        names(&next.frames),
        [("demo.Service.outer".into(), "Service.java".into(), 0)]
    );
    assert!(next.approximate, "past the last point: the method alone");
}

#[test]
fn with_debug_points_between_safepoints_a_leaf_between_points_is_exact() {
    let jvm = Jvm::new();
    let mut namer = Namer::new(std::process::id(), LAYOUT, true);
    let between = namer.compiled(jvm.nmethod(), 7, 0x3a).unwrap();
    assert!(!between.approximate);
    assert_eq!(between.frames.len(), 2);
    // No point after it: still the method alone, approximate.
    assert!(namer.compiled(jvm.nmethod(), 7, 0x40).unwrap().approximate);
}

#[test]
fn another_compilation_at_the_same_address_is_not_named() {
    let mut jvm = Jvm::new();
    let mut namer = Namer::new(std::process::id(), LAYOUT, false);
    // The walk recorded compilation 6; the memory now holds 7.
    assert!(namer.compiled(jvm.nmethod(), 6, 0x40).is_none());
    // Recompiled in place: what was named as 7 stays 7's.
    let seven = names(&namer.compiled(jvm.nmethod(), 7, 0x40).unwrap().frames);
    put(&mut jvm.nmethod, 24, &8u32.to_le_bytes());
    assert_eq!(
        names(&namer.compiled(jvm.nmethod(), 7, 0x40).unwrap().frames),
        seven
    );
    assert!(namer.compiled(jvm.nmethod(), 9, 0x40).is_none());
}

#[test]
fn an_interpreted_frame_is_named_only_while_its_method_is_the_one_recorded() {
    let jvm = Jvm::new();
    let mut namer = Namer::new(std::process::id(), LAYOUT, false);
    let method = address(&jvm.methods[0]);
    #[expect(clippy::cast_possible_truncation, reason = "the walk's check")]
    let check = (address(&jvm.const_methods[0]) >> 3) as u32;
    let frame = namer.interpreted(method, check, 2).unwrap();
    assert_eq!(
        names(&[frame]),
        [("demo.Service.outer".into(), "Service.java".into(), 11)]
    );
    assert!(namer.interpreted(method, check ^ 1, 2).is_none());
}

use super::{
    code::{self, CodeError},
    debug_offsets::{self, DebugOffsetsError},
    layout::{self, Version},
    *,
};
use crate::process::{maps::FileStamp, memory::Memory};

const V312: Version = Version {
    major: 3,
    minor: 12,
};

fn me() -> Memory {
    Memory {
        pid: std::process::id(),
    }
}

/// A compact ASCII `str` of 3.12 (header of 40 bytes, then the text).
fn ascii(text: &str) -> Vec<u8> {
    let mut object = vec![0u8; 40];
    object[16..24].copy_from_slice(&(text.len() as u64).to_le_bytes());
    // kind 1, compact, ascii.
    object[32..36].copy_from_slice(&(1u32 << 2 | 1 << 5 | 1 << 6).to_le_bytes());
    object.extend_from_slice(text.as_bytes());
    object
}

/// A `bytes` object.
fn bytes(data: &[u8]) -> Vec<u8> {
    let mut object = vec![0u8; 32];
    object[16..24].copy_from_slice(&(data.len() as u64).to_le_bytes());
    object.extend_from_slice(data);
    object
}

fn put(object: &mut [u8], at: u64, value: u64) {
    let at = usize::try_from(at).unwrap();
    object[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// A 3.12 code object of `Worker.run` in `app.py` from line 10, whose
/// instructions 0 and 1 are on line 10 and 2 on line 12, in this
/// process's memory (with what it points to).
struct FakeCode {
    code: Vec<u8>,
    _parts: Vec<Vec<u8>>,
}

const CODE_TYPE: u64 = 0x5555_0000;

fn fake_code(first_line: u32) -> FakeCode {
    // Two units on the first line (short form), one two lines on.
    let lines = bytes(&[0x80 | 1, 0x05, 0x80 | (12 << 3), 0x01, 0x02]);
    fake_code_of("Worker.run", ascii("app.py"), lines, first_line)
}

/// A 3.12 code object named `qualified`, whose file name is the `str`
/// object `file` and line table the `bytes` object `lines`.
fn fake_code_of(qualified: &str, file: Vec<u8>, lines: Vec<u8>, first_line: u32) -> FakeCode {
    let layout = layout::known(V312).unwrap();
    let name = ascii("run");
    let qualname = ascii(qualified);
    let mut code = vec![0u8; 256];
    put(&mut code, layout::OB_TYPE, CODE_TYPE);
    let at = usize::try_from(layout.code.first_line).unwrap();
    code[at..at + 4].copy_from_slice(&first_line.to_le_bytes());
    let addr = |v: &Vec<u8>| v.as_ptr() as u64;
    put(&mut code, layout.code.name, addr(&name));
    put(&mut code, layout.code.qualname.unwrap(), addr(&qualname));
    put(&mut code, layout.code.filename, addr(&file));
    put(&mut code, layout.code.line_table, addr(&lines));
    FakeCode {
        code,
        _parts: vec![name, qualname, file, lines],
    }
}

fn interpreter() -> Interpreter {
    Interpreter::for_tests(V312, layout::known(V312).unwrap(), CODE_TYPE)
}

#[test]
fn a_code_object_is_read_with_its_qualified_name_file_and_lines() {
    let fake = fake_code(10);
    let info = code::read(me(), &interpreter(), 0, fake.code.as_ptr() as u64, 10).unwrap();
    assert_eq!(
        (info.name.as_str(), info.file.as_str()),
        ("Worker.run", "app.py")
    );
    // The instruction as recorded: a byte offset from the object's start.
    let start = u32::try_from(layout::known(V312).unwrap().code.instructions.unwrap()).unwrap();
    assert_eq!(info.line(start), 10);
    assert_eq!(info.line(start + 2), 10);
    assert_eq!(info.line(start + 4), 12);
}

#[test]
fn names_and_tables_longer_than_one_read_are_read_whole() {
    // Past the first read of each (256 bytes from the object's start).
    let long_name = "Outer.".repeat(60) + "run";
    let long_file = format!("/srv/{}/app.py", "deep/".repeat(80));
    let table: Vec<u8> = [0x80 | 1, 0x05].repeat(400);
    let fake = fake_code_of(&long_name, ascii(&long_file), bytes(&table), 10);
    let info = code::read(me(), &interpreter(), 0, fake.code.as_ptr() as u64, 10).unwrap();
    assert_eq!((info.name, info.file), (long_name, long_file));
    assert_eq!(info.line_table, table);
}

#[test]
fn a_name_at_its_mappings_end_is_read_on_its_own() {
    // A file name whose object ends where its page does, the next page
    // unmapped: a read of 256 bytes from its start fails there.
    let file = ascii("end.py");
    // SAFETY: a fresh anonymous mapping of two pages, the second unmapped
    // again; the first is written only within its bounds and unmapped at
    // the end of the test.
    let page = unsafe {
        let page = usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)).unwrap();
        let base = libc::mmap(
            std::ptr::null_mut(),
            2 * page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(base, libc::MAP_FAILED);
        assert_eq!(libc::munmap(base.cast::<u8>().add(page).cast(), page), 0);
        std::slice::from_raw_parts_mut(base.cast::<u8>(), page)
    };
    let at = page.len() - file.len();
    page[at..].copy_from_slice(&file);
    let mut fake = fake_code(10);
    let layout = layout::known(V312).unwrap();
    put(
        &mut fake.code,
        layout.code.filename,
        page[at..].as_ptr() as u64,
    );
    let info = code::read(me(), &interpreter(), 0, fake.code.as_ptr() as u64, 10);
    // SAFETY: the page mapped above, no longer used.
    unsafe { libc::munmap(page.as_mut_ptr().cast(), page.len()) };
    assert_eq!(info.unwrap().file, "end.py");
}

/// `python` with process `pid` of interpreter `interpreter` (file `file`,
/// loaded at its own addresses) published.
fn published(python: &mut Python, pid: u32, interpreter: &Arc<Interpreter>, file: FileStamp) {
    python.processes.insert(
        pid,
        Process {
            interpreter: Arc::clone(interpreter),
            file,
            bias: 0,
        },
    );
}

#[test]
fn a_code_object_of_the_interpreters_own_image_is_read_once_per_file() {
    let fake = fake_code(10);
    let at = fake.code.as_ptr() as u64;
    let file = FileStamp {
        dev: 1,
        ino: 2,
        size: 3,
        mtime: 4,
    };
    // A process that cannot be read (no such pid): only what was read in
    // another process of the same file can name its code.
    let gone = u32::MAX - 1;
    let asked = |pid| CodeSeen {
        pid,
        first_line: 10,
        code: at,
    };
    for (image, shared) in [((at, at + 256), true), ((0, 0), false)] {
        let interpreter = Arc::new(interpreter().with_image(image));
        let mut python = Python::default();
        published(&mut python, std::process::id(), &interpreter, file);
        published(&mut python, gone, &interpreter, file);
        python.read_code(asked(std::process::id()));
        python.read_code(asked(gone));
        let stats = python.stats();
        assert_eq!(stats.codes_read, 1);
        assert_eq!(
            (stats.codes_shared, stats.codes_unreadable),
            if shared { (1, 0) } else { (0, 1) }
        );
        let codes = python.take_codes();
        assert_eq!(codes.len(), if shared { 2 } else { 1 });
        assert!(codes.iter().all(|c| c.info.name == "Worker.run"));
        // Another file's process is read, not named from this one's.
        let other = FileStamp { ino: 3, ..file };
        published(&mut python, gone, &interpreter, other);
        python.read_code(asked(gone));
        assert_eq!(python.stats().codes_shared, u64::from(shared));
    }
}

#[test]
fn a_code_object_replaced_or_freed_since_it_was_recorded_is_not_named() {
    let fake = fake_code(10);
    let at = fake.code.as_ptr() as u64;
    // Another code object at the address: another first line.
    assert!(matches!(
        code::read(me(), &interpreter(), 0, at, 11),
        Err(CodeError::Reused)
    ));
    // Not a code object at all (another type there now).
    assert!(matches!(
        code::read(me(), &interpreter(), 8, at, 10),
        Err(CodeError::NotCode)
    ));
    // Memory no longer mapped.
    assert!(matches!(
        code::read(me(), &interpreter(), 0, 8, 10),
        Err(CodeError::Memory(_))
    ));
}

#[test]
fn versions_outside_3_8_to_3_13_have_no_layout() {
    for minor in [6, 7, 13, 14] {
        assert_eq!(
            layout::known(Version { major: 3, minor }),
            None,
            "3.{minor}"
        );
    }
    assert!(layout::known(Version { major: 3, minor: 8 }).is_some());
}

/// `_Py_DebugOffsets` of 3.13 as its 3.13.0 build lays it out, with the
/// offsets of that build.
fn debug_offsets(free_threaded: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; 584];
    bytes[..8].copy_from_slice(b"xdebugpy");
    let mut set = |at: usize, v: u64| bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
    set(8, 0x030d_00f0);
    set(16, free_threaded);
    for (at, v) in [
        (40, 632),
        (72, 7344),
        (112, 16),
        (120, 7752),
        (136, 7768),
        (144, 7760),
        (168, 8),
        (184, 72),
        (192, 152),
        (232, 8),
        (240, 0),
        (248, 56),
        (264, 70),
        (280, 112),
        (288, 120),
        (296, 128),
        (304, 136),
        (312, 68),
        (344, 200),
        (560, 40),
    ] {
        set(at, v);
    }
    bytes
}

#[test]
fn the_3_13_layout_is_read_from_its_debug_offsets() {
    let bytes = debug_offsets(0);
    assert_eq!(debug_offsets::version_hex(&bytes), Some(0x030d_00f0));
    let layout = debug_offsets::layout(&bytes).unwrap();
    assert_eq!(layout.interpreters_head, 632);
    assert_eq!(layout.kernel.interp_threads_head, 7344);
    assert_eq!(layout.kernel.tstate_frame, 72);
    assert_eq!(
        (
            layout.kernel.interp_gil,
            layout.kernel.gil_last_holder,
            layout.kernel.gil_locked
        ),
        (16, 8, 16)
    );
    assert_eq!(layout.kernel.frame_owner, 70);
    // Past the owner byte, the last field read.
    assert_eq!(layout.kernel.frame_read, 71);
    assert_eq!(layout.code.instructions, Some(200));
    assert_eq!((layout.ascii_size, layout.compact_size), (40, 56));
}

#[test]
fn debug_offsets_of_a_free_threaded_build_or_without_the_cookie_are_refused() {
    assert_eq!(
        debug_offsets::layout(&debug_offsets(1)),
        Err(DebugOffsetsError::FreeThreaded)
    );
    let mut bytes = debug_offsets(0);
    bytes[0] = b'y';
    assert_eq!(
        debug_offsets::layout(&bytes),
        Err(DebugOffsetsError::NoCookie)
    );
}

#[test]
fn a_file_that_is_not_an_interpreter_is_not_python() {
    let me = std::fs::read("/proc/self/exe").unwrap();
    assert!(matches!(
        recognise(&me, "/proc/self/exe"),
        Recognised::NotPython
    ));
}

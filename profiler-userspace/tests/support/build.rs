//! Builds the fixtures written in C and Go, the way their users build
//! them: plain `cc -O2` (no frame-pointer flags), plain `go build`.
use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
};

use object::Object as _;

fn source(language: &str, file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../profiler-fixtures")
        .join(language)
        .join(file)
}

fn run(mut command: Command, what: &str) {
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("{what}: {e} (.ci/run installs the toolchains)"));
    assert!(status.success(), "{what}: {status}");
}

/// Builds `profiler-fixtures/c/NAME.c` into the program `dir/NAME`.
pub fn c_program(name: &str, dir: &Path) -> PathBuf {
    let bin = dir.join(name);
    let mut command = Command::new("cc");
    command.args(["-O2", "-pthread", "-o"]).arg(&bin);
    command.arg(source("c", &format!("{name}.c")));
    run(command, &format!("cc -O2 {name}.c"));
    bin
}

/// Builds `profiler-fixtures/c/NAME.c` into the program `dir/NAME` with
/// linker options `link` too (as an SDK's build asks for).
pub fn c_program_linked(name: &str, dir: &Path, link: &[&str]) -> PathBuf {
    let bin = dir.join(name);
    let mut command = Command::new("cc");
    command
        .args(["-O2", "-pthread"])
        .args(link)
        .arg("-o")
        .arg(&bin);
    command.arg(source("c", &format!("{name}.c")));
    run(command, &format!("cc -O2 {name}.c {}", link.join(" ")));
    bin
}

/// Builds the C files `sources` (in `profiler-fixtures/c`) into `out`
/// with `cc -O2` and `flags` (`-shared -fPIC` for a library; linker
/// options), as a project's build does.
pub fn cc(out: &Path, sources: &[&str], flags: &[&str]) -> PathBuf {
    let mut command = Command::new("cc");
    command.args(["-O2", "-pthread", "-o"]).arg(out);
    for file in sources {
        command.arg(source("c", file));
    }
    // After the sources: libraries are searched for what precedes them.
    command.args(flags);
    run(
        command,
        &format!("cc -O2 {} {}", sources.join(" "), flags.join(" ")),
    );
    out.to_path_buf()
}

/// Builds `profiler-fixtures/c/NAME.c` into the shared library
/// `dir/libNAME.so`.
pub fn c_library(name: &str, dir: &Path) -> PathBuf {
    let lib = dir.join(format!("lib{name}.so"));
    let mut command = Command::new("cc");
    command.args(["-O2", "-shared", "-fPIC", "-o"]).arg(&lib);
    command.arg(source("c", &format!("{name}.c")));
    run(command, &format!("cc -O2 -shared {name}.c"));
    lib
}

/// Builds `profiler-fixtures/go/NAME.go` with plain `go build` into
/// `dir/NAME`.
pub fn go_program(name: &str, dir: &Path) -> PathBuf {
    go_build(name, dir, &[])
}

/// Builds `profiler-fixtures/go/NAME.go` as vendors ship Go (`go build
/// -ldflags=-s -w`: no symbols, no DWARF) into `dir/NAME`.
pub fn stripped_go_program(name: &str, dir: &Path) -> PathBuf {
    go_build(name, dir, &["-ldflags=-s -w"])
}

fn go_build(name: &str, dir: &Path, flags: &[&str]) -> PathBuf {
    let bin = dir.join(name);
    let mut command = Command::new("go");
    command.arg("build").args(flags).arg("-o").arg(&bin);
    command.arg(source("go", &format!("{name}.go")));
    command.current_dir(dir);
    if std::env::var_os("HOME").is_none() {
        command.env("GOCACHE", dir.join("gocache"));
    }
    run(command, &format!("go build {name}.go"));
    bin
}

/// A C fixture built as distributions ship it: `cc -O2 -g`, the debug
/// information split off with `objcopy --only-keep-debug`, the program
/// stripped of every symbol and given a `.gnu_debuglink` to the debug file.
pub struct Stripped {
    /// The stripped program, `bin_dir/NAME`.
    pub bin: PathBuf,
    /// The debug file, `scratch/NAME.debug`: nowhere the profiler looks
    /// until a test puts it there.
    pub debug_file: PathBuf,
    /// The program's build id, hex.
    pub build_id: String,
    /// The program before stripping, `scratch/NAME.full`.
    pub unstripped: PathBuf,
}

/// Builds `profiler-fixtures/c/NAME.c` as [`Stripped`] into `bin_dir`,
/// using `scratch` for the intermediate files.
pub fn stripped_c_program(name: &str, bin_dir: &Path, scratch: &Path) -> Stripped {
    let full = scratch.join(format!("{name}.full"));
    let mut command = Command::new("cc");
    command.args(["-O2", "-g", "-pthread", "-o"]).arg(&full);
    command.arg(source("c", &format!("{name}.c")));
    run(command, &format!("cc -O2 -g {name}.c"));

    let debug_file = scratch.join(format!("{name}.debug"));
    let mut command = Command::new("objcopy");
    command.arg("--only-keep-debug").arg(&full).arg(&debug_file);
    run(command, "objcopy --only-keep-debug");

    let bin = bin_dir.join(name);
    let mut command = Command::new("objcopy");
    command
        .arg("--strip-all")
        .arg(format!("--add-gnu-debuglink={}", debug_file.display()))
        .arg(&full)
        .arg(&bin);
    run(command, "objcopy --strip-all --add-gnu-debuglink");

    let data = std::fs::read(&bin).expect("read stripped program");
    let elf = object::File::parse(&*data).expect("stripped program is ELF");
    assert!(
        elf.section_by_name(".symtab").is_none(),
        "{} still has a symbol table",
        bin.display()
    );
    let build_id = elf
        .build_id()
        .expect("read build id")
        .expect("cc gives programs a build id")
        .iter()
        .fold(String::new(), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        });
    Stripped {
        bin,
        debug_file,
        build_id,
        unstripped: full,
    }
}

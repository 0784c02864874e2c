//! Builds the fixtures written in C and Go, the way their users build
//! them: plain `cc -O2` (no frame-pointer flags), plain `go build`.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

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
    let bin = dir.join(name);
    let mut command = Command::new("go");
    command.arg("build").arg("-o").arg(&bin);
    command.arg(source("go", &format!("{name}.go")));
    command.current_dir(dir);
    if std::env::var_os("HOME").is_none() {
        command.env("GOCACHE", dir.join("gocache"));
    }
    run(command, &format!("go build {name}.go"));
    bin
}

//! What building a binary's unwind table costs, for `cargo xtask bench`:
//! for each ELF file named on the command line, one line of `key=value`
//! fields: the file's size, the time to build its table from the bytes in
//! memory (the read is not counted), the rows and their kernel memory
//! (rows and index, as the daemon places them).
use std::{process::ExitCode, time::Instant};

use profiler_userspace::unwind::table;

fn main() -> ExitCode {
    let mut status = ExitCode::SUCCESS;
    for path in std::env::args().skip(1) {
        let data = match std::fs::read(&path) {
            Ok(data) => data,
            Err(e) => {
                eprintln!("reading {path}: {e}");
                status = ExitCode::FAILURE;
                continue;
            }
        };
        let started = Instant::now();
        match table::build(&data) {
            Ok(info) => {
                let (_, run) = info.table.kernel_run();
                let ms = started.elapsed().as_secs_f64() * 1000.0;
                let rows = info.table.rows.len();
                println!(
                    "path={path} file_bytes={} build_ms={ms:.1} rows={rows} table_bytes={} source={}",
                    data.len(),
                    size_of_val(&run[..]),
                    info.table.source
                );
            }
            Err(e) => {
                eprintln!("building the table of {path}: {e}");
                status = ExitCode::FAILURE;
            }
        }
    }
    status
}

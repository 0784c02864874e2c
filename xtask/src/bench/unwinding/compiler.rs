//! Section 6's row of a real program's walk: gcc's compiler proper, a
//! large binary with deep stacks.
use std::{fmt::Write as _, fs, path::Path, process::Command};

use anyhow::Context as _;

use super::{PerRun, bpf_stats_over};
use crate::bench::{
    daemon_metrics::Metrics,
    tools::{SCRATCH_DIR, attach, profiler},
};

/// Functions of the generated C file each compile builds: about 6 s of
/// `cc1` at `-O2` here.
pub(super) const COMPILER_FUNCTIONS: u32 = 1500;

/// `on_cpu_sample`'s ns per run and native frames per sample while one
/// `gcc -O2 -c` per CPU compiles a generated file, under `profiler --comm
/// cc1`: a large binary (Debian's `cc1` has 25 MB of code) whose stacks
/// run about 30 frames deep, each frame's rows looked up in a table that
/// no small fixture's fits beside.
pub(super) fn compiler_walk_cost() -> anyhow::Result<(PerRun, f64)> {
    let dir = Path::new(SCRATCH_DIR);
    fs::create_dir_all(dir)?;
    let source = dir.join("compiled.c");
    let mut text = String::new();
    for i in 0..COMPILER_FUNCTIONS {
        writeln!(
            text,
            "unsigned long g{i}(unsigned long x) {{ for (int i = 0; i < {n}; i++) \
             x = x * 6364136223846793005ul + {i}ul + (x >> {s}); return x ^ (x >> 3); }}",
            n = 10 + i % 7,
            s = 1 + i % 5
        )?;
    }
    fs::write(&source, text)?;
    let metrics = Metrics::new()?;
    let mut args = vec![
        "--comm",
        "cc1",
        "--wait",
        "--no-off-cpu",
        "--frequency",
        "999",
    ];
    args.extend(["--unwind", "table", "--interval", "1s"]);
    args.extend(metrics.args());
    let attached = attach(&profiler("", &args), 0)?.context("profiler")?;
    let copies = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let per_run = bpf_stats_over(|| {
        let compiles = (0..copies)
            .map(|i| {
                Command::new("gcc")
                    .args(["-O2", "-c"])
                    .arg(&source)
                    .arg("-o")
                    .arg(dir.join(format!("compiled{i}.o")))
                    .spawn()
                    .context("gcc (apt-get install gcc)")
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        for mut compile in compiles {
            let status = compile.wait()?;
            anyhow::ensure!(
                status.success(),
                "gcc -O2 -c {}: {status}",
                source.display()
            );
        }
        Ok(())
    })?;
    // The last samples' window, written within its 1 s interval.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let scrape = metrics.scrape()?;
    attached.stop()?;
    Ok((per_run, scrape.native_frames_per_sample()?))
}

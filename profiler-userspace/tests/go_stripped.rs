//! A stripped Go program (`-ldflags='-s -w'`: no `.symtab`, no DWARF, no
//! `.debug_frame`), profiled for real: its frames are named from its
//! `.gopclntab`, each sampled PC as `go tool addr2line` names it, for
//! Debian's Go 1.19 and the newer toolchains `cargo xtask setup` installs.
mod support;

use std::process::Command;

use support::{
    Fixture, Profiler,
    go::{self, named_as_addr2line, sampled_frames},
    profile_fixture, require_root, share, weight_under,
};

#[test]
fn a_stripped_go_program_is_named_and_unwound_by_its_gopclntab() {
    require_root();
    for toolchain in go::toolchains() {
        let dir = tempfile::tempdir().unwrap();
        let bin = go::build_split(&toolchain, dir.path(), "split", true);
        let bin_path = bin.to_str().unwrap().to_owned();
        let mut command = Command::new(&bin);
        let go_profile = dir.path().join("go-cpu.pb.gz");
        command.arg("4").arg(&go_profile);
        let mut fixture = Fixture::spawn_command(command);
        let pid = fixture.pid();
        let out = dir.path().join("profiles");
        let (truth, profiles) = profile_fixture(&mut fixture, &out, &["--frequency", "499"]);

        let (samples, named_leaf, frames) = sampled_frames(&profiles, pid, &bin_path);
        let version = go::version(&toolchain);
        assert!(samples > 1000, "{version}: {samples} samples");
        assert!(
            named_leaf * 100 >= samples * 95,
            "{version}: {named_leaf} of {samples} samples have a named leaf"
        );
        named_as_addr2line(&toolchain, &bin, &frames);

        // Unwound by its .gopclntab (no .eh_frame, no .debug_frame), the
        // frameless main.spin keeps its caller: the split between
        // main.heavy and main.light is the one the program timed itself.
        // ~2,000 samples: the share's standard error is about 1 point, so
        // 5 points fails a lost caller (tens of points), not jitter. Go's
        // own profile of the run is shown beside it, not held to it: it
        // is a sampler too, and read 70.5% for a timed 75-77% once.
        let own = support::read_profile(&go_profile);
        let own_samples: Vec<_> = own.0.sample.iter().collect();
        let go_share = share(
            weight_under(&own, &own_samples, "main.heavy", "cpu"),
            weight_under(&own, &own_samples, "main.light", "cpu"),
        );
        let (mut heavy, mut light, mut spin) = (0, 0, 0);
        for (_, p) in &profiles {
            let ours: Vec<_> = p.samples_of(pid).collect();
            heavy += weight_under(p, &ours, "main.heavy", "samples");
            light += weight_under(p, &ours, "main.light", "samples");
            spin += weight_under(p, &ours, "main.spin", "samples");
        }
        assert!(
            heavy + light >= spin * 9 / 10,
            "{version}: callers of main.spin: heavy {heavy} + light {light} of {spin}"
        );
        let ours = share(heavy, light);
        let timed = share(
            i64::try_from(truth["heavy_ns"]).unwrap(),
            i64::try_from(truth["light_ns"]).unwrap(),
        );
        assert!(
            (ours - timed).abs() <= 5.0,
            "{version}: main.heavy {ours:.1}% here vs {timed:.1}% timed by the program (Go's own profile: {go_share:.1}%)"
        );
        eprintln!(
            "{version}: {named_leaf}/{samples} samples with a named leaf, {} PCs as addr2line, main.heavy {ours:.1}% (timed: {timed:.1}%, Go's own profile: {go_share:.1}%)",
            frames.len()
        );
    }
}

/// A Go program before Go 1.26 has no GNU build id: the symbolizer knows
/// its binary by its digest (else its path and file), never by its path
/// alone. Built anew by a newer toolchain and
/// renamed over the old one (a deploy) while the old process still runs,
/// each process's frames are named from its own build, the new one's in
/// a window after the old one's: by path alone, the new build's PCs were
/// named from the old one's table and its results.
#[test]
fn a_go_program_deployed_anew_at_its_path_is_named_from_each_build() {
    require_root();
    let toolchains = go::toolchains();
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("app");
    let out = dir.path().join("profiles");
    let running = Profiler::start(&[
        "--comm",
        "app",
        "--wait",
        "--output-dir",
        out.to_str().unwrap(),
        "--interval",
        "1s",
        "--frequency",
        "499",
    ]);
    let mut runs = Vec::new();
    // Debian's Go 1.19 and the oldest newer one: from Go 1.26 on, `go
    // build` writes a GNU build id too.
    for (i, toolchain) in toolchains[..2].iter().enumerate() {
        // Each build stays reachable under its own name, for addr2line.
        let build = go::build_split(toolchain, dir.path(), &format!("build{i}"), true);
        let notes = Command::new("readelf")
            .arg("-n")
            .arg(&build)
            .output()
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&notes.stdout).contains("NT_GNU_BUILD_ID"),
            "{}: its build has a GNU build id",
            go::version(toolchain)
        );
        let staged = dir.path().join("app.new");
        std::fs::hard_link(&build, &staged).unwrap();
        std::fs::rename(&staged, &app).unwrap();
        let mut command = Command::new(&app);
        command
            .arg("3")
            .arg(dir.path().join(format!("go-cpu{i}.pb.gz")));
        let mut fixture = Fixture::spawn_command(command);
        fixture.go();
        fixture.results();
        // It lingers, its mappings readable, until the window is written.
        runs.push((toolchain, build, fixture));
    }
    running.stop();
    let profiles = support::profiles(&out);
    let app_path = app.to_str().unwrap();
    for (toolchain, build, fixture) in &runs {
        let (samples, named_leaf, frames) = sampled_frames(&profiles, fixture.pid(), app_path);
        let version = go::version(toolchain);
        assert!(samples > 500, "{version}: {samples} samples");
        assert!(
            named_leaf * 100 >= samples * 95,
            "{version}: {named_leaf} of {samples} samples have a named leaf"
        );
        named_as_addr2line(toolchain, build, &frames);
        eprintln!(
            "{version}: {named_leaf}/{samples} samples with a named leaf, {} PCs as addr2line",
            frames.len()
        );
    }
}

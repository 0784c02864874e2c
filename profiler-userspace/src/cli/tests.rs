use super::*;

const LIMITS: KernelLimits = KernelLimits {
    max_sample_rate: 1000,
};

fn parse_ok(args: &[&str]) -> Config {
    parse(
        std::iter::once("profiler").chain(args.iter().copied()),
        LIMITS,
    )
    .unwrap_or_else(|e| panic!("{args:?} rejected: {e}"))
}

fn parse_err(args: &[&str]) -> clap::Error {
    match parse(
        std::iter::once("profiler").chain(args.iter().copied()),
        LIMITS,
    ) {
        Ok(config) => panic!("{args:?} accepted as {config:?}"),
        Err(e) => e,
    }
}

#[test]
fn defaults() {
    let config = parse_ok(&["--pid", "42"]);
    assert_eq!(config.target, Target::Pids(vec![42]));
    assert_eq!(config.output_dir, PathBuf::from("/var/lib/profiler"));
    assert_eq!(config.interval, Duration::from_mins(1));
    assert_eq!(config.duration, None);
    assert_eq!(config.frequency_hz, 99);
    assert_eq!(config.retain, 100);
    assert_eq!(
        config.unwind,
        Unwind::Tables { rows: 4 << 20 },
        "32 MiB of 8-byte rows"
    );
    assert_eq!(
        parse_ok(&["--pid", "1", "--unwind-table-memory", "1GiB"]).unwind,
        Unwind::Tables { rows: 128 << 20 }
    );
    assert_eq!(
        parse_ok(&["--pid", "1", "--unwind", "frame-pointer"]).unwind,
        Unwind::FramePointers
    );
    assert!(config.modes.on_cpu());
    assert_eq!(
        config.modes.off_cpu(),
        Some(OffCpu {
            rate_ns: 10_000_000,
            naive_weights: false,
            dispatch_only: false,
            interval_cells: INTERVAL_CELLS_LEN,
            user_stacks: UserStacks::TaskWork,
            wakers: false,
        })
    );
}

#[test]
fn off_cpu_flags() {
    let config = parse_ok(&["--all", "--off-cpu-rate", "0", "--no-on-cpu"]);
    assert_eq!(
        config.modes.off_cpu(),
        Some(OffCpu {
            rate_ns: 0,
            naive_weights: false,
            dispatch_only: false,
            interval_cells: INTERVAL_CELLS_LEN,
            user_stacks: UserStacks::TaskWork,
            wakers: false,
        })
    );
    assert!(!config.modes.on_cpu());
    let config = parse_ok(&["--all", "--off-cpu-rate", "250us", "--off-cpu-sys-exit"]);
    assert_eq!(
        config.modes.off_cpu(),
        Some(OffCpu {
            rate_ns: 250_000,
            naive_weights: false,
            dispatch_only: false,
            interval_cells: INTERVAL_CELLS_LEN,
            user_stacks: UserStacks::SysExit,
            wakers: false,
        })
    );
    assert_eq!(parse_ok(&["--all", "--no-off-cpu"]).modes.off_cpu(), None);
}

#[test]
fn wakers_need_off_cpu() {
    let config = parse_ok(&["--all", "--wakers"]);
    assert!(config.modes.off_cpu().is_some_and(|o| o.wakers));
    let err = parse_err(&["--all", "--wakers", "--no-off-cpu"]);
    assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
}

#[test]
fn goroutine_wakers_need_the_goroutine_view() {
    assert!(parse_ok(&["--all", "--goroutine-wakers"]).goroutine_wakers);
    assert!(!parse_ok(&["--all"]).goroutine_wakers);
    let err = parse_err(&["--all", "--goroutine-wakers", "--goroutine-frequency", "0"]);
    assert_eq!(err.kind(), ErrorKind::ValueValidation);
    assert!(err.to_string().contains("--goroutine-frequency"), "{err}");
}

#[test]
fn what_if_names_a_function_and_a_share_and_needs_wakers() {
    let config = parse_ok(&["--all", "--wakers", "--what-if", "ns::c_compute:50"]);
    assert_eq!(
        config.what_if,
        Some(WhatIf {
            function: "ns::c_compute".to_owned(),
            faster_pct: 50,
        })
    );
    assert_eq!(parse_ok(&["--all"]).what_if, None);
    let err = parse_err(&["--all", "--what-if", "c_compute:50"]);
    assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument);
    let goroutines = parse_ok(&["--all", "--goroutine-wakers", "--what-if", "c_compute:50"]);
    assert!(goroutines.what_if.is_some());
    for bad in [
        "c_compute",
        "c_compute:0",
        "c_compute:100",
        ":50",
        "c_compute:fast",
    ] {
        let err = parse_err(&["--all", "--wakers", "--what-if", bad]);
        assert_eq!(err.kind(), ErrorKind::ValueValidation, "{bad}");
        assert!(err.to_string().contains("FUNCTION:PERCENT"), "{bad}: {err}");
    }
}

#[cfg(feature = "test-knobs")]
#[test]
fn test_knobs() {
    let off_cpu = |flags: &[&str]| {
        let args: Vec<&str> = ["--all"].iter().chain(flags).copied().collect();
        parse_ok(&args).modes.off_cpu().unwrap()
    };
    assert!(off_cpu(&["--off-cpu-naive-weights"]).naive_weights);
    assert!(off_cpu(&["--off-cpu-dispatch-only"]).dispatch_only);
    assert_eq!(
        off_cpu(&["--off-cpu-interval-cells", "4"]).interval_cells,
        4
    );
    assert_eq!(
        off_cpu(&["--off-cpu-no-task-work"]).user_stacks,
        UserStacks::Rseq
    );
    assert_eq!(
        off_cpu(&["--off-cpu-no-task-work", "--off-cpu-sys-exit"]).user_stacks,
        UserStacks::SysExit
    );
}

#[cfg(not(feature = "test-knobs"))]
#[test]
fn a_product_build_has_no_test_knobs() {
    for knob in [
        &["--off-cpu-naive-weights"][..],
        &["--off-cpu-dispatch-only"],
        &["--off-cpu-no-task-work"],
        &["--off-cpu-interval-cells", "4"],
    ] {
        let args: Vec<&str> = ["--all"].iter().chain(knob).copied().collect();
        assert_eq!(
            parse_err(&args).kind(),
            ErrorKind::UnknownArgument,
            "{knob:?}"
        );
    }
}

#[test]
fn durations_and_repeated_pids() {
    let config = parse_ok(&[
        "--pid",
        "7",
        "--pid",
        "3",
        "--pid",
        "7",
        "--interval",
        "500ms",
        "--duration",
        "1m",
        "--frequency",
        "1000",
        "--retain",
        "3",
        "--output-dir",
        "/tmp/x",
    ]);
    assert_eq!(config.target, Target::Pids(vec![3, 7]));
    assert_eq!(config.interval, Duration::from_millis(500));
    assert_eq!(config.duration, Some(Duration::from_mins(1)));
    assert_eq!(config.sample_period_ns(), 1_000_000);
    assert_eq!(config.retain, 3);
}

#[test]
fn discovery_flags() {
    let config = parse_ok(&["--comm", "nginx", "--pid-file", "/run/x.pid", "--wait"]);
    assert_eq!(config.target, Target::Pids(Vec::new()));
    assert_eq!(
        config.discover,
        Discover {
            comms: vec!["nginx".into()],
            pid_files: vec![PathBuf::from("/run/x.pid")],
            wait: true
        }
    );
    assert_eq!(
        parse_err(&["--pid", "1", "--wait"]).kind(),
        ErrorKind::MissingRequiredArgument
    );
    assert_eq!(
        parse_err(&["--all", "--comm", "x"]).kind(),
        ErrorKind::ArgumentConflict
    );
    let names: Vec<String> = (0..=TARGET_COMMS_MAX_ENTRIES)
        .map(|i| format!("name{i}"))
        .collect();
    let args: Vec<&str> = names.iter().flat_map(|n| ["--comm", n.as_str()]).collect();
    let err = parse_err(&args);
    assert_eq!(err.kind(), ErrorKind::ValueValidation);
    assert!(err.to_string().contains("at most 64 --comm names"), "{err}");
    assert_eq!(
        parse_ok(&args[2..]).discover.comms.len(),
        TARGET_COMMS_MAX_ENTRIES as usize
    );
}

#[test]
fn all_mode() {
    assert_eq!(parse_ok(&["--all"]).target, Target::All);
}

#[test]
fn target_is_required_and_exclusive() {
    assert_eq!(parse_err(&[]).kind(), ErrorKind::MissingRequiredArgument);
    assert_eq!(
        parse_err(&["--all", "--pid", "1"]).kind(),
        ErrorKind::ArgumentConflict
    );
}

#[test]
fn bad_values() {
    for (args, needle) in [
        (&["--pid", "1", "--frequency", "0"][..], "at least 1 Hz"),
        (
            &["--pid", "1", "--frequency", "1001"][..],
            "exceeds the kernel's limit of 1000",
        ),
        (&["--pid", "1", "--interval", "0s"][..], "--interval"),
        (&["--pid", "1", "--duration", "0s"][..], "--duration"),
        (&["--pid", "1", "--retain", "0"][..], "--retain"),
        (&["--pid", "0"][..], "not a process id"),
        (
            &["--pid", "1", "--no-off-cpu", "--no-on-cpu"][..],
            "nothing to profile",
        ),
        (&["--pid", "1", "--off-cpu-rate", "5s"][..], "at most"),
        (
            &["--pid", "1", "--unwind-table-memory", "1K"][..],
            "between 64K and 16G",
        ),
        (
            &["--pid", "1", "--unwind-table-memory", "12X"][..],
            "not a size",
        ),
        (
            &[
                "--pid",
                "1",
                "--unwind",
                "frame-pointer",
                "--unwind-table-memory",
                "1G",
            ][..],
            "no use with --unwind frame-pointer",
        ),
    ] {
        let err = parse_err(args);
        assert_eq!(err.kind(), ErrorKind::ValueValidation, "{args:?}");
        assert!(err.to_string().contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn unknown_unwind_method_lists_the_known_ones() {
    let err = parse_err(&["--pid", "1", "--unwind", "dwarf"]);
    assert_eq!(err.kind(), ErrorKind::InvalidValue);
    let text = err.to_string();
    assert!(
        text.contains("table") && text.contains("frame-pointer"),
        "{text}"
    );
}

#[test]
fn malformed_flags() {
    assert_eq!(
        parse_err(&["--pid", "x"]).kind(),
        ErrorKind::ValueValidation
    );
    assert!(
        parse_err(&["--pid", "1", "--interval", "soon"])
            .to_string()
            .contains("10s")
    );
    assert_eq!(
        parse_err(&["--pid", "1", "--bogus"]).kind(),
        ErrorKind::UnknownArgument
    );
}

#[test]
fn listen_is_off_by_default_and_a_port_alone_binds_loopback() {
    assert_eq!(parse_ok(&["--all"]).listen, None);
    assert_eq!(
        parse_ok(&["--all", "--listen", "6060"]).listen,
        Some("127.0.0.1:6060".parse().unwrap())
    );
    assert_eq!(
        parse_ok(&["--all", "--listen", "[::1]:6060"]).listen,
        Some("[::1]:6060".parse().unwrap())
    );
    assert_eq!(
        parse_ok(&["--all", "--listen", "0.0.0.0:80"]).listen,
        Some("0.0.0.0:80".parse().unwrap())
    );
    for bad in ["localhost", "6060x", "1.2.3.4", "70000"] {
        let err = parse_err(&["--all", "--listen", bad]).to_string();
        assert!(
            err.contains("--listen") && err.contains("not an address"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn push_defaults_and_validation() {
    assert_eq!(parse_ok(&["--all"]).push, None);
    let config = parse_ok(&[
        "--all",
        "--push",
        "http://pyroscope:4040",
        "--push",
        "https://gw.example/parca/",
    ]);
    let push = config.push.unwrap();
    assert_eq!(push.endpoints.len(), 2);
    assert_eq!(push.protocol, crate::config::PushProtocol::Pyroscope);
    assert_eq!(push.interval, Duration::from_secs(15));
    assert_eq!(push.spool_max_bytes, 256 << 20);
    assert_eq!(
        push.spool_dir,
        PathBuf::from("/var/lib/profiler/push-spool")
    );
    let otlp = parse_ok(&[
        "--all",
        "--push",
        "http://c:4318",
        "--push-protocol",
        "otlp",
    ]);
    assert_eq!(
        otlp.push.unwrap().protocol,
        crate::config::PushProtocol::Otlp
    );

    for (args, message) in [
        (
            &["--push", "pyroscope:4040"][..],
            "not an http or https URL",
        ),
        (&["--push", "ftp://x"], "not an http or https URL"),
        (&["--push", "http://u:secret@x"], "--push-auth-file"),
        (&["--push", "http://x", "--push", "http://x"], "given twice"),
        (
            &["--push", "http://x", "--push-interval", "100ms"],
            "at least 1s",
        ),
        (
            &["--push", "http://x", "--push-spool-max", "1K"],
            "at least 64K",
        ),
        (
            &["--push", "http://x", "--push-protocol", "zipkin"],
            "zipkin",
        ),
        (&["--push-protocol", "parca"], "--push"),
        (&["--push-auth-file", "/etc/x"], "--push"),
    ] {
        let all: Vec<&str> = ["--all"].iter().chain(args).copied().collect();
        let error = parse_err(&all).to_string();
        assert!(error.contains(message), "{args:?}: {error}");
    }
}

mod symbols;

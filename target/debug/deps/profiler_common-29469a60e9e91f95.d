/work/main/target/debug/deps/profiler_common-29469a60e9e91f95.d: profiler-common/src/lib.rs profiler-common/src/maps.rs profiler-common/src/sample.rs profiler-common/src/stats.rs

/work/main/target/debug/deps/libprofiler_common-29469a60e9e91f95.rlib: profiler-common/src/lib.rs profiler-common/src/maps.rs profiler-common/src/sample.rs profiler-common/src/stats.rs

/work/main/target/debug/deps/libprofiler_common-29469a60e9e91f95.rmeta: profiler-common/src/lib.rs profiler-common/src/maps.rs profiler-common/src/sample.rs profiler-common/src/stats.rs

profiler-common/src/lib.rs:
profiler-common/src/maps.rs:
profiler-common/src/sample.rs:
profiler-common/src/stats.rs:

/work/main/target/bpfel-unknown-none/release/deps/profiler_common-90e3a4351fd662c3.d: profiler-common/src/lib.rs profiler-common/src/maps.rs profiler-common/src/off_cpu.rs profiler-common/src/sample.rs profiler-common/src/stack.rs profiler-common/src/stats.rs profiler-common/src/task.rs

/work/main/target/bpfel-unknown-none/release/deps/libprofiler_common-90e3a4351fd662c3.rlib: profiler-common/src/lib.rs profiler-common/src/maps.rs profiler-common/src/off_cpu.rs profiler-common/src/sample.rs profiler-common/src/stack.rs profiler-common/src/stats.rs profiler-common/src/task.rs

/work/main/target/bpfel-unknown-none/release/deps/libprofiler_common-90e3a4351fd662c3.rmeta: profiler-common/src/lib.rs profiler-common/src/maps.rs profiler-common/src/off_cpu.rs profiler-common/src/sample.rs profiler-common/src/stack.rs profiler-common/src/stats.rs profiler-common/src/task.rs

profiler-common/src/lib.rs:
profiler-common/src/maps.rs:
profiler-common/src/off_cpu.rs:
profiler-common/src/sample.rs:
profiler-common/src/stack.rs:
profiler-common/src/stats.rs:
profiler-common/src/task.rs:

/work/main/target/bpfel-unknown-none/release/deps/profiler-f07727bca5372dc4.d: profiler-ebpf/src/main.rs profiler-ebpf/src/maps.rs profiler-ebpf/src/on_cpu.rs profiler-ebpf/src/target.rs

/work/main/target/bpfel-unknown-none/release/deps/profiler-f07727bca5372dc4: profiler-ebpf/src/main.rs profiler-ebpf/src/maps.rs profiler-ebpf/src/on_cpu.rs profiler-ebpf/src/target.rs

profiler-ebpf/src/main.rs:
profiler-ebpf/src/maps.rs:
profiler-ebpf/src/on_cpu.rs:
profiler-ebpf/src/target.rs:

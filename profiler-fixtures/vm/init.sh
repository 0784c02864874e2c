#!/bin/busybox sh
# The VM's /init (`cargo xtask vm-test`): runs the profiler on this kernel
# against the fixtures, then prints every file the runs wrote to the serial
# console, base64 between markers, for the host to check, and powers off.
#
# Each run (into /out/NAME: fixture.out, profiler.log, profiles/): a fixture with the tests' protocol (`ready ...` on stdout, a
# line on stdin starts its measured phase, it prints its own measurements,
# then lingers until stdin closes), the profiler attached to it, and the
# profiler stopped with SIGTERM, which must write the last window.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mount -t bpf bpf /sys/fs/bpf
mkdir -p /out
# Loopback, for the fixtures' sockets (chanwake's).
ip link set lo up

say() { echo "=== $*"; }

# wait_for FILE TEXT: until FILE holds TEXT (60 s at most).
wait_for() {
    i=0
    until grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 600 ]; then
            say "timeout waiting for '$2' in $1"
            cat "$1"
            return 1
        fi
        sleep 0.1
    done
}

# await PID WHAT: waits for child PID to exit (60 s at most), its exit
# status into $status. If it does not exit, says so on the console with
# each of its threads' state and kernel stack, kills it, and $status is
# "hung". (Not in a subshell: only this shell can wait for its children.)
await() {
    i=0
    until grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null || [ ! -e "/proc/$1" ]; do
        i=$((i + 1))
        if [ $i -gt 600 ]; then
            say "$2 (pid $1) did not exit in 60 s; its threads:"
            for t in /proc/"$1"/task/*; do
                echo "$t $(cat "$t/comm") $(cut -d' ' -f3 "$t/stat") wchan=$(cat "$t/wchan")"
                cat "$t/stack"
            done
            kill -KILL "$1"
            wait "$1"
            status=hung
            return
        fi
        sleep 0.1
    done
    wait "$1"
    status=$?
}

# run NAME FIXTURE SECONDS -- PROFILER ARGS: one run, into /out/NAME.
# {pid} in the profiler's arguments stands for the fixture's pid.
run() {
    name=$1 fixture=$2 seconds=$3
    shift 4
    dir=/out/$name
    mkdir -p "$dir/profiles"
    mkfifo "/tmp/$name.in"
    "/fixtures/$fixture" "$seconds" < "/tmp/$name.in" > "$dir/fixture.out" 2>&1 &
    fixture_pid=$!
    exec 3> "/tmp/$name.in"
    wait_for "$dir/fixture.out" ready || return
    args=""
    for a in "$@"; do
        [ "$a" = "{pid}" ] && a=$fixture_pid
        args="$args $a"
    done
    # shellcheck disable=SC2086 # the arguments are words
    /profiler $args --output-dir "$dir/profiles" 2> "$dir/profiler.log" &
    profiler_pid=$!
    say "$name: fixture pid $fixture_pid, profiler pid $profiler_pid"
    wait_for "$dir/profiler.log" profiling || return
    echo go >&3
    wait_for "$dir/fixture.out" "_ns=" || return
    kill -TERM $profiler_pid
    await $profiler_pid profiler
    echo "exit=$status" >> "$dir/profiler.log"
    exec 3>&-
    await $fixture_pid fixture
    say "ran $name: fixture exit=$status"
}

# start NAME -- PROFILER ARGS: the profiler, into /out/NAME, once it says
# it is profiling.
start() {
    name=$1
    shift 2
    dir=/out/$name
    mkdir -p "$dir/profiles"
    /profiler "$@" --output-dir "$dir/profiles" 2> "$dir/profiler.log" &
    profiler_pid=$!
    wait_for "$dir/profiler.log" profiling
}

# stop NAME: the profiler stopped with SIGTERM, its exit in its log.
stop() {
    kill -TERM $profiler_pid
    await $profiler_pid profiler
    echo "exit=$status" >> "/out/$1/profiler.log"
    say "ran $1"
}

# brief NAME COUNT -- PROFILER ARGS: COUNT runs of short_lived (50 ms of
# spin each, one after another) under the profiler, into /out/NAME, after
# one run whose samples have its table built.
brief() {
    name=$1 count=$2
    shift 2
    start "$name" "$@" || return
    /fixtures/short_lived 0.3 0 > "$dir/warm.out"
    sleep 1
    i=0
    while [ $i -lt "$count" ]; do
        /fixtures/short_lived 0.05 0 >> "$dir/fixture.out"
        i=$((i + 1))
    done
    stop "$name"
}

# goroutines NAME SECONDS -- PROFILER ARGS: chanwake (no protocol: it runs
# SECONDS, then prints its measurements) under the profiler, into
# /out/NAME, after a run of 1 s that has its binary probed.
goroutines() {
    name=$1 seconds=$2
    shift 2
    start "$name" "$@" || return
    /fixtures/chanwake 1 > "$dir/warm.out"
    sleep 1
    /fixtures/chanwake "$seconds" > "$dir/fixture.out"
    stop "$name"
}

# A line of its own: the firmware leaves terminal codes before it.
echo
say "kernel $(uname -r)"
# On-CPU callers of a frameless leaf, and off-CPU time through glibc (its
# threads are registered with rseq: user stacks at rseq_update here).
# At the default 99 Hz, for 20 s (some 1900 samples of spin: 4 points is
# 4 standard errors of the split): under TCG every sample's walk is
# emulated, and 999 Hz (as on the host) left the fixture's threads
# waiting for a CPU, which skewed their waits by up to 20%.
# With --wakers: what woke each wait (sched_waking on this kernel).
run pid natural 20 -- --pid {pid} --off-cpu-rate 1ms --wakers
# The same program under --all.
run all natural 20 -- --all --off-cpu-rate 1ms
# A thread without rseq (the Go runtime registers none): flushed at its
# next switch-out by default, exact with --off-cpu-sys-exit.
run go naps 4 -- --pid {pid} --off-cpu-rate 1ms
run go_sys_exit naps 4 -- --pid {pid} --off-cpu-rate 1ms --off-cpu-sys-exit
# One nap across several windows: no pidfds for threads before 6.9.
run windows long_nap 3.5 -- --pid {pid} --interval 1s
# Brief processes' first samples, walked through the kernel's own tree of
# mappings (this kernel's maple tree and inode layout).
brief brief 30 -- --all
# Goroutine wakers: a uprobe on the Go binary's runtime.ready.
goroutines goroutine_wakers 4 -- --all --goroutine-wakers

for f in $(find /out -type f | sort); do
    say "file ${f#/out/}"
    base64 "$f"
    say "end"
done
say "done"
poweroff -f

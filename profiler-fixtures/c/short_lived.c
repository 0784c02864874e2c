/*
 * A process that lives about a second and is gone long before the
 * profiler's window ends: it spins in brief_work for argv[1] seconds,
 * sleeps in nap for argv[2] seconds, prints
 * "short_lived pid=P cpu_ns=C spin_ns=W sleep_ns=S" (its own measurements:
 * the spin's CPU and wall time, the sleep's wall time) and exits. Plain `cc -O2`, no frame pointers; the sleep blocks in glibc.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static uint64_t ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Mixes a buffer until `seconds` of wall time have passed. */
uint64_t brief_work(double seconds) {
    static uint32_t buf[4096];
    uint64_t end = ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9);
    uint64_t h = 1469598103934665603u;
    while (ns(CLOCK_MONOTONIC) < end) {
        for (size_t i = 0; i < sizeof buf / sizeof buf[0]; i++) {
            h = (h ^ buf[i]) * 1099511628211u;
            buf[i] = (uint32_t)(h >> 29);
        }
    }
    return h;
}

/* Sleeps `seconds` in one nanosleep. */
void nap(double seconds) {
    struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: short_lived SPIN_SECONDS SLEEP_SECONDS\n");
        return 2;
    }
    uint64_t cpu = ns(CLOCK_PROCESS_CPUTIME_ID), spin = ns(CLOCK_MONOTONIC);
    uint64_t h = brief_work(atof(argv[1]));
    cpu = ns(CLOCK_PROCESS_CPUTIME_ID) - cpu;
    spin = ns(CLOCK_MONOTONIC) - spin;
    uint64_t slept = ns(CLOCK_MONOTONIC);
    nap(atof(argv[2]));
    slept = ns(CLOCK_MONOTONIC) - slept;
    printf("short_lived pid=%d cpu_ns=%llu spin_ns=%llu sleep_ns=%llu hash=%llu\n", getpid(),
           (unsigned long long)cpu, (unsigned long long)spin, (unsigned long long)slept,
           (unsigned long long)(h & 0xff));
    return 0;
}

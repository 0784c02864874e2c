/*
 * A program whose code arrives late: on "go" it loads a library with
 * dlopen (argv[2], built from late_lib.c) and spends its CPU time there,
 * in lib_heavy and lib_light, which call the frameless leaf lib_spin with
 * 3:1 work. Plain `cc -O2`, no frame pointers, as late_lib.c.
 *
 * Protocol (as the other fixtures): "ready pid=P", wait for "go", load the
 * library, run for argv[1] seconds, print "heavy_ns=H light_ns=L" (the CPU
 * time of each kind of call), then linger until stdin closes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
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

typedef uint64_t (*work_fn)(uint64_t);

static uint64_t timed(work_fn work, uint64_t unit, uint64_t *sink) {
    uint64_t start = ns(CLOCK_THREAD_CPUTIME_ID);
    *sink += work(unit);
    return ns(CLOCK_THREAD_CPUTIME_ID) - start;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: late SECONDS LIBRARY\n");
        return 2;
    }
    double run_seconds = atof(argv[1]);
    char line[64];
    printf("ready pid=%d\n", getpid());
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 1;

    void *lib = dlopen(argv[2], RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    work_fn heavy = (work_fn)dlsym(lib, "lib_heavy");
    work_fn light = (work_fn)dlsym(lib, "lib_light");
    if (!heavy || !light) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 1;
    }

    uint64_t heavy_ns = 0, light_ns = 0, sink = 0;
    uint64_t end = ns(CLOCK_MONOTONIC) + (uint64_t)(run_seconds * 1e9);
    /*
     * Each round spins for 4 units, a unit drawn between 0.5 and 1.5 of
     * its mean (about 0.5 ms here). With a fixed unit every round took the
     * same 2.0 ms on this machine, and a 499 Hz sampler (2.004 ms) hit the
     * same phase of round after round: 2,000 samples then count as a
     * handful, and lib_heavy's share came out anywhere around its 75%
     * (63% twice in CI), for any periodic sampler alike. Random lengths
     * spread the samples over every phase.
     */
    uint64_t seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15u + ns(CLOCK_MONOTONIC);
    while (ns(CLOCK_MONOTONIC) < end) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        uint64_t unit = 200000 + (seed >> 33) % 400000;
        heavy_ns += timed(heavy, unit, &sink);
        light_ns += timed(light, unit, &sink);
    }
    printf("heavy_ns=%llu light_ns=%llu sink=%llu\n", (unsigned long long)heavy_ns,
           (unsigned long long)light_ns, (unsigned long long)(sink % 10));
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
    }
    return 0;
}

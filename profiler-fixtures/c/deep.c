/*
 * A deep stack: descend() recurses argv[2] times (default 200, deeper
 * than the profiler walks; no tail calls: each level uses its callee's
 * result), then spins at the bottom. Plain `cc -O2`, as the other C
 * fixtures.
 *
 * Protocol (as the other fixtures): "ready pid=P", wait for "go", spin for
 * argv[1] seconds at that depth, print "depth=D", then linger until stdin
 * closes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double run_seconds;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static uint64_t bottom(void) {
    uint64_t end = now_ns() + (uint64_t)(run_seconds * 1e9), x = 1;
    while (now_ns() < end) {
        for (int i = 0; i < 100000; i++) {
            x = x * 6364136223846793005u + 1;
            __asm__ volatile("" : "+r"(x));
        }
    }
    return x;
}

__attribute__((noinline)) uint64_t descend(int level) {
    if (level == 0) return bottom();
    uint64_t below = descend(level - 1);
    __asm__ volatile("" : "+r"(below));
    return below + (uint64_t)level;
}

int main(int argc, char **argv) {
    run_seconds = argc > 1 ? atof(argv[1]) : 2.0;
    int depth = argc > 2 ? atoi(argv[2]) : 200;
    char line[64];
    printf("ready pid=%d\n", getpid());
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 1;
    uint64_t sink = descend(depth);
    printf("depth=%d sink=%llu\n", depth, (unsigned long long)(sink % 10));
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
    }
    return 0;
}

/* One of the thousands of distinct short-lived programs `distinct_binaries.rs`
 * runs once each: the test copies it with a build id of its own per copy, as a
 * build host's freshly linked programs are. Computes for MS milliseconds of CPU
 * time (argv[1]), then exits. */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static long cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

__attribute__((noinline)) unsigned long distinct_work(long ns) {
    long start = cpu_ns();
    unsigned long x = 0;
    do {
        for (int i = 0; i < 10000; i++) x += (unsigned long)i ^ sink;
    } while (cpu_ns() - start < ns);
    return x;
}

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 30;
    sink += distinct_work(ms * 1000000L);
    return 0;
}

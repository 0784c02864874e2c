/*
 * A process that becomes another program: it spins in before_exec for
 * argv[1] seconds, prints "exec_into pid=P cpu_ns=C spin_ns=W" (its own
 * measurements: the spin's CPU and wall time), waits 20 ms (as a shell
 * that waits on a pipe before it execs: the profiler has seen it leave a
 * CPU under its first name), then execs argv[2] with the arguments after
 * it, keeping its pid. Plain `cc -O2`, no frame pointers.
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

/* Counts primes by trial division until `seconds` of wall time have passed. */
uint64_t before_exec(double seconds) {
    uint64_t end = ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9);
    uint64_t primes = 0, n = 3;
    while (ns(CLOCK_MONOTONIC) < end) {
        for (int k = 0; k < 256; k++, n += 2) {
            uint64_t d = 3;
            while (d * d <= n && n % d != 0) d += 2;
            primes += d * d > n;
        }
    }
    return primes;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: exec_into SECONDS PROGRAM [ARGS...]\n");
        return 2;
    }
    uint64_t cpu = ns(CLOCK_PROCESS_CPUTIME_ID), spin = ns(CLOCK_MONOTONIC);
    uint64_t primes = before_exec(atof(argv[1]));
    cpu = ns(CLOCK_PROCESS_CPUTIME_ID) - cpu;
    spin = ns(CLOCK_MONOTONIC) - spin;
    printf("exec_into pid=%d cpu_ns=%llu spin_ns=%llu primes=%llu\n", getpid(),
           (unsigned long long)cpu, (unsigned long long)spin, (unsigned long long)primes);
    fflush(stdout);
    struct timespec wait = {0, 20000000};
    nanosleep(&wait, NULL);
    execv(argv[2], argv + 2);
    perror("execv");
    return 1;
}

/*
 * A C program built the way distributions build them: plain `cc -O2`, no
 * frame-pointer flags, glibc (itself without frame pointers).
 *
 * Thread "cpu": cpu_heavy and cpu_light call the same frameless leaf, spin,
 * with 3:1 work; each measures the CPU time of its calls.
 * Thread "block": sleep_phase (nanosleep), read_phase (read on a pipe that a
 * helper writes to 2 ms later) and lock_phase (pthread_mutex_lock on a mutex
 * a helper holds for 2 ms); each measures its off-CPU time as wall time
 * minus its own CPU time in the call. Before each read it tells the helper,
 * which writes 2 ms after hearing it: however late either thread runs (a
 * loaded machine, an emulated CPU), the pipe never holds a byte ahead of
 * the read, so every read waits.
 *
 * Protocol (as the Rust fixtures): "ready pid=P cpu=T block=T", wait for
 * "go", run for argv[1] seconds, print the measurements, then linger until
 * stdin closes.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double run_seconds;
static volatile int running = 1;
static uint64_t heavy_ns, light_ns, sleep_ns, read_ns, lock_ns;
static int pipe_fds[2];  /* helper -> read_phase: the byte it waits for */
static int ready_fds[2]; /* block -> helper: about to read; EOF: stop */
static pthread_mutex_t contended = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t handshake = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t handshake_cond = PTHREAD_COND_INITIALIZER;
static int lock_held;

static uint64_t ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The frameless leaf: pure arithmetic, no calls. */
__attribute__((noinline)) uint64_t spin(uint64_t iterations) {
    uint64_t x = iterations;
    for (uint64_t i = 0; i < iterations; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static uint64_t sink;

__attribute__((noinline)) void cpu_heavy(uint64_t unit) {
    uint64_t start = ns(CLOCK_THREAD_CPUTIME_ID);
    sink += spin(3 * unit);
    heavy_ns += ns(CLOCK_THREAD_CPUTIME_ID) - start;
}

__attribute__((noinline)) void cpu_light(uint64_t unit) {
    uint64_t start = ns(CLOCK_THREAD_CPUTIME_ID);
    sink += spin(unit);
    light_ns += ns(CLOCK_THREAD_CPUTIME_ID) - start;
}

static void *cpu_thread(void *arg) {
    (void)arg;
    /*
     * A unit of spinning is about 0.5 ms here, drawn between 0.5 and 1.5
     * of that each round: rounds of one fixed length can line up with a
     * periodic sampler and show it the same phase every time (late.c
     * says how that moved a 75% share to 63%).
     */
    uint64_t seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15u + ns(CLOCK_MONOTONIC);
    while (running) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        uint64_t unit = 200000 + (seed >> 33) % 400000;
        cpu_heavy(unit);
        cpu_light(unit);
    }
    return NULL;
}

/* Off-CPU time of a call: wall minus the thread's own CPU time. */
#define OFF_CPU(total, call)                                                  \
    do {                                                                      \
        uint64_t wall0 = ns(CLOCK_MONOTONIC);                                 \
        uint64_t cpu0 = ns(CLOCK_THREAD_CPUTIME_ID);                          \
        call;                                                                 \
        total += (ns(CLOCK_MONOTONIC) - wall0) -                              \
                 (ns(CLOCK_THREAD_CPUTIME_ID) - cpu0);                        \
    } while (0)

__attribute__((noinline)) void sleep_phase(void) {
    struct timespec two_ms = {0, 2000000};
    OFF_CPU(sleep_ns, nanosleep(&two_ms, NULL));
}

__attribute__((noinline)) void read_phase(void) {
    char byte;
    OFF_CPU(read_ns, if (read(pipe_fds[0], &byte, 1) != 1) abort());
}

__attribute__((noinline)) void lock_phase(void) {
    /* Wait until the helper holds the mutex, then block on it. */
    pthread_mutex_lock(&handshake);
    while (!lock_held && running) pthread_cond_wait(&handshake_cond, &handshake);
    lock_held = 0;
    pthread_mutex_unlock(&handshake);
    OFF_CPU(lock_ns, pthread_mutex_lock(&contended));
    pthread_mutex_unlock(&contended);
}

static void *helper_thread(void *arg) {
    (void)arg;
    struct timespec two_ms = {0, 2000000};
    char byte;
    /* One round per "about to read" from the block thread, until EOF. */
    while (read(ready_fds[0], &byte, 1) == 1) {
        /* For read_phase: a byte 2 ms from now. */
        nanosleep(&two_ms, NULL);
        if (write(pipe_fds[1], "x", 1) != 1) abort();
        /* For lock_phase: hold the mutex for 2 ms. */
        pthread_mutex_lock(&contended);
        pthread_mutex_lock(&handshake);
        lock_held = 1;
        pthread_cond_signal(&handshake_cond);
        pthread_mutex_unlock(&handshake);
        nanosleep(&two_ms, NULL);
        pthread_mutex_unlock(&contended);
    }
    return NULL;
}

static pid_t block_tid;
static pthread_mutex_t tid_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tid_cond = PTHREAD_COND_INITIALIZER;
static pid_t cpu_tid;
static int go;

static void wait_go(pid_t *tid) {
    pthread_mutex_lock(&tid_lock);
    *tid = (pid_t)syscall(SYS_gettid);
    pthread_cond_broadcast(&tid_cond);
    while (!go) pthread_cond_wait(&tid_cond, &tid_lock);
    pthread_mutex_unlock(&tid_lock);
}

static void *cpu_main(void *arg) {
    wait_go(&cpu_tid);
    return cpu_thread(arg);
}

static void *block_main(void *arg) {
    (void)arg;
    wait_go(&block_tid);
    while (running) {
        sleep_phase();
        if (write(ready_fds[1], "r", 1) != 1) abort();
        read_phase();
        lock_phase();
    }
    return NULL;
}

int main(int argc, char **argv) {
    run_seconds = argc > 1 ? atof(argv[1]) : 5.0;
    if (pipe(pipe_fds) != 0 || pipe(ready_fds) != 0) abort();
    pthread_t cpu, block, helper;
    pthread_create(&cpu, NULL, cpu_main, NULL);
    pthread_create(&block, NULL, block_main, NULL);
    pthread_mutex_lock(&tid_lock);
    while (!cpu_tid || !block_tid) pthread_cond_wait(&tid_cond, &tid_lock);
    pthread_mutex_unlock(&tid_lock);
    printf("ready pid=%d cpu=%d block=%d\n", getpid(), cpu_tid, block_tid);
    fflush(stdout);

    char line[64];
    if (!fgets(line, sizeof line, stdin) || strncmp(line, "go", 2) != 0) return 1;
    pthread_create(&helper, NULL, helper_thread, NULL);
    pthread_mutex_lock(&tid_lock);
    go = 1;
    pthread_cond_broadcast(&tid_cond);
    pthread_mutex_unlock(&tid_lock);
    struct timespec run = {(time_t)run_seconds,
                           (long)((run_seconds - (time_t)run_seconds) * 1e9)};
    nanosleep(&run, NULL);
    running = 0;
    pthread_join(cpu, NULL);
    pthread_join(block, NULL);
    close(ready_fds[1]);
    pthread_join(helper, NULL);
    printf("heavy_ns=%llu light_ns=%llu sleep_ns=%llu read_ns=%llu lock_ns=%llu\n",
           (unsigned long long)heavy_ns, (unsigned long long)light_ns,
           (unsigned long long)sleep_ns, (unsigned long long)read_ns,
           (unsigned long long)lock_ns);
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
    }
    return 0;
}

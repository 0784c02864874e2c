/*
 * A three-stage pipeline, built as distributions build programs: plain
 * `cc -O2`, no frame-pointer flags, every wait inside glibc.
 *
 * Thread "c" computes: c_compute() spins for 1 to 3 ms (drawn each round),
 * then c_hand_over() passes the round to "b" under a mutex and a condition
 * variable (a futex), and goes on with the next round.
 * Thread "b" waits for it: b_wait() (pthread_cond_wait), then b_forward()
 * writes one byte to a pipe.
 * Thread "a" waits for that byte: a_wait() (read). It measures its
 * off-CPU time in the read (wall minus its own CPU time): all of it, in
 * the end, a wait for c_compute.
 *
 * Each thread is named as it is called here (pthread_setname_np).
 * Protocol (as the Rust fixtures): "ready pid=P a=T b=T c=T", wait for
 * "go", run for argv[1] seconds, print the measurements, then linger
 * until stdin closes.
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

static volatile int running = 1;
static uint64_t a_ns, a_reads, c_rounds;
static int pipe_fds[2];
static pthread_mutex_t stage = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t handed = PTHREAD_COND_INITIALIZER;
static uint64_t rounds_handed, rounds_taken;

static uint64_t ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t sink;

__attribute__((noinline)) void c_compute(uint64_t until_cpu_ns) {
    uint64_t x = until_cpu_ns;
    while (ns(CLOCK_THREAD_CPUTIME_ID) < until_cpu_ns) {
        for (int i = 0; i < 1000; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            __asm__ volatile("" : "+r"(x));
        }
    }
    sink += x;
}

__attribute__((noinline)) void c_hand_over(void) {
    pthread_mutex_lock(&stage);
    rounds_handed++;
    pthread_cond_signal(&handed);
    pthread_mutex_unlock(&stage);
}

__attribute__((noinline)) int b_wait(void) {
    pthread_mutex_lock(&stage);
    while (rounds_taken == rounds_handed && running) pthread_cond_wait(&handed, &stage);
    int more = rounds_taken < rounds_handed;
    rounds_taken = rounds_handed;
    pthread_mutex_unlock(&stage);
    return more;
}

__attribute__((noinline)) void b_forward(void) {
    if (write(pipe_fds[1], "x", 1) != 1) abort();
}

__attribute__((noinline)) void a_wait(void) {
    char byte;
    uint64_t wall0 = ns(CLOCK_MONOTONIC), cpu0 = ns(CLOCK_THREAD_CPUTIME_ID);
    if (read(pipe_fds[0], &byte, 1) != 1) abort();
    a_ns += (ns(CLOCK_MONOTONIC) - wall0) - (ns(CLOCK_THREAD_CPUTIME_ID) - cpu0);
    a_reads++;
}

static pthread_mutex_t tid_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tid_cond = PTHREAD_COND_INITIALIZER;
static pid_t a_tid, b_tid, c_tid;
static int go;

static void wait_go(pid_t *tid, const char *name) {
    pthread_setname_np(pthread_self(), name);
    pthread_mutex_lock(&tid_lock);
    *tid = (pid_t)syscall(SYS_gettid);
    pthread_cond_broadcast(&tid_cond);
    while (!go) pthread_cond_wait(&tid_cond, &tid_lock);
    pthread_mutex_unlock(&tid_lock);
}

static void *c_main(void *arg) {
    (void)arg;
    wait_go(&c_tid, "c");
    uint64_t seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15u + ns(CLOCK_MONOTONIC);
    while (running) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        c_compute(ns(CLOCK_THREAD_CPUTIME_ID) + 1000000 + (seed >> 33) % 2000000);
        c_hand_over();
        c_rounds++;
    }
    /* Wakes b for its last look at `running`. */
    c_hand_over();
    return NULL;
}

static void *b_main(void *arg) {
    (void)arg;
    wait_go(&b_tid, "b");
    while (b_wait()) b_forward();
    /* a's last read. */
    b_forward();
    return NULL;
}

static void *a_main(void *arg) {
    (void)arg;
    wait_go(&a_tid, "a");
    while (running) a_wait();
    return NULL;
}

int main(int argc, char **argv) {
    double run_seconds = argc > 1 ? atof(argv[1]) : 5.0;
    if (pipe(pipe_fds) != 0) abort();
    pthread_t a, b, c;
    pthread_create(&a, NULL, a_main, NULL);
    pthread_create(&b, NULL, b_main, NULL);
    pthread_create(&c, NULL, c_main, NULL);
    pthread_mutex_lock(&tid_lock);
    while (!a_tid || !b_tid || !c_tid) pthread_cond_wait(&tid_cond, &tid_lock);
    pthread_mutex_unlock(&tid_lock);
    printf("ready pid=%d a=%d b=%d c=%d\n", getpid(), a_tid, b_tid, c_tid);
    fflush(stdout);

    char line[64];
    if (!fgets(line, sizeof line, stdin) || strncmp(line, "go", 2) != 0) return 1;
    pthread_mutex_lock(&tid_lock);
    go = 1;
    pthread_cond_broadcast(&tid_cond);
    pthread_mutex_unlock(&tid_lock);
    struct timespec run = {(time_t)run_seconds,
                           (long)((run_seconds - (time_t)run_seconds) * 1e9)};
    nanosleep(&run, NULL);
    running = 0;
    pthread_join(c, NULL);
    pthread_join(b, NULL);
    pthread_join(a, NULL);
    printf("a_ns=%llu a_reads=%llu c_rounds=%llu\n", (unsigned long long)a_ns,
           (unsigned long long)a_reads, (unsigned long long)c_rounds);
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
    }
    return 0;
}

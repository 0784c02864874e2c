/*
 * Three threads, a, b and c, serving rounds of work, built as distributions
 * build programs: plain `cc -O2`, no frame-pointer flags, every wait inside
 * glibc. How fast a round goes depends on c_compute(), whose length the
 * caller sets, in one of two shapes:
 *
 * serial:   a asks b for a round (a pipe) and waits for the reply (a
 *           pipe); b asks c (a condition variable) and waits for it; c
 *           computes and answers. One round is in flight: a_work, b_work
 *           and c_compute add up.
 * pipeline: c computes rounds back to back and hands each to b (a
 *           condition variable, without waiting); b forwards it to a (a
 *           pipe). Every stage works at once: the slowest sets the pace.
 *
 * a_work and b_work take argv[4] microseconds of CPU each, c_compute
 * argv[3] (all measured on the thread's CPU clock, so a busy machine
 * stretches them alike), on average: each round's work varies within
 * +-25%, as requests do. Rounds all alike fall into step with a sampler's
 * fixed period (five 2.02 ms rounds to one period of 99 Hz held c's
 * samples on its hand-off to b, 7% of them for a whole run).
 *
 * Protocol (as the Rust fixtures): "ready pid=P", wait for "go", start the
 * threads (named a, b, c) and run for argv[1] seconds, print
 * "rounds=R run_ns=N a=TID" (N: from go to a's last round), then linger
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
static uint64_t c_ns, ab_ns, rounds, started_ns, ended_ns;
static pid_t a_tid, b_tid, c_tid;
static int request[2], reply[2];
static pthread_mutex_t stage = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t handed = PTHREAD_COND_INITIALIZER;
static pthread_cond_t answered = PTHREAD_COND_INITIALIZER;
static uint64_t rounds_handed, rounds_taken;
static int answer, quit;

static uint64_t ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t sink;

/* Computes for cpu_ns of the thread's CPU time; returns the result. */
static uint64_t spin(uint64_t cpu_ns) {
    uint64_t until = ns(CLOCK_THREAD_CPUTIME_ID) + cpu_ns, x = until;
    while (ns(CLOCK_THREAD_CPUTIME_ID) < until) {
        for (int i = 0; i < 200; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            __asm__ volatile("" : "+r"(x));
        }
    }
    return x;
}

/* A round's work, as requests vary: uniform within +-25% of `mean_ns`
 * (a per-thread generator, so the shape's rounds draw alike). */
static uint64_t varied(uint64_t mean_ns) {
    static __thread uint64_t state = 88172645463325252u;
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return mean_ns / 4 * 3 + state % (mean_ns / 2 + 1);
}

__attribute__((noinline)) void c_compute(void) { sink += spin(varied(c_ns)); }
__attribute__((noinline)) void b_work(void) { sink ^= spin(varied(ab_ns)); }
__attribute__((noinline)) void a_work(void) { sink -= spin(varied(ab_ns)); }

/* Names the calling thread `what` and notes its id in `tid`. */
static void name(const char *what, pid_t *tid) {
    pthread_setname_np(pthread_self(), what);
    *tid = (pid_t)syscall(SYS_gettid);
}

/* Waits under `stage` until `ready` holds or b has quit; says which. */
static int wait_for(pthread_cond_t *cond, int (*ready)(void)) {
    while (!ready() && !quit) pthread_cond_wait(cond, &stage);
    return ready();
}

static int round_handed(void) { return rounds_taken < rounds_handed; }
static int round_answered(void) { return answer; }

static void quit_all(void) {
    pthread_mutex_lock(&stage);
    quit = 1;
    pthread_cond_broadcast(&handed);
    pthread_cond_broadcast(&answered);
    pthread_mutex_unlock(&stage);
}

/* serial */

static void *serial_a(void *arg) {
    (void)arg;
    name("a", &a_tid);
    char byte = 'x';
    while (running) {
        a_work();
        if (write(request[1], &byte, 1) != 1 || read(reply[0], &byte, 1) != 1) abort();
        rounds++;
    }
    ended_ns = ns(CLOCK_MONOTONIC);
    close(request[1]);
    return NULL;
}

static void *serial_b(void *arg) {
    (void)arg;
    name("b", &b_tid);
    char byte;
    while (read(request[0], &byte, 1) == 1) {
        b_work();
        pthread_mutex_lock(&stage);
        rounds_handed++;
        pthread_cond_signal(&handed);
        wait_for(&answered, round_answered);
        answer = 0;
        pthread_mutex_unlock(&stage);
        if (write(reply[1], &byte, 1) != 1) abort();
    }
    quit_all();
    return NULL;
}

static void *serial_c(void *arg) {
    (void)arg;
    name("c", &c_tid);
    for (;;) {
        pthread_mutex_lock(&stage);
        int more = wait_for(&handed, round_handed);
        rounds_taken++;
        pthread_mutex_unlock(&stage);
        if (!more) return NULL;
        c_compute();
        pthread_mutex_lock(&stage);
        answer = 1;
        pthread_cond_signal(&answered);
        pthread_mutex_unlock(&stage);
    }
}

/* pipeline */

static void *pipeline_c(void *arg) {
    (void)arg;
    name("c", &c_tid);
    while (running) {
        c_compute();
        pthread_mutex_lock(&stage);
        rounds_handed++;
        pthread_cond_signal(&handed);
        pthread_mutex_unlock(&stage);
    }
    quit_all();
    return NULL;
}

static void *pipeline_b(void *arg) {
    (void)arg;
    name("b", &b_tid);
    for (;;) {
        pthread_mutex_lock(&stage);
        int more = wait_for(&handed, round_handed);
        rounds_taken++;
        pthread_mutex_unlock(&stage);
        if (!more) break;
        b_work();
        if (write(request[1], "x", 1) != 1) abort();
    }
    close(request[1]);
    return NULL;
}

static void *pipeline_a(void *arg) {
    (void)arg;
    name("a", &a_tid);
    char byte;
    while (read(request[0], &byte, 1) == 1) {
        a_work();
        rounds++;
    }
    ended_ns = ns(CLOCK_MONOTONIC);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5 || (strcmp(argv[2], "serial") != 0 && strcmp(argv[2], "pipeline") != 0)) {
        fprintf(stderr, "usage: whatif SECONDS serial|pipeline C_MICROS AB_MICROS\n");
        return 2;
    }
    double run_seconds = atof(argv[1]);
    int serial = strcmp(argv[2], "serial") == 0;
    c_ns = (uint64_t)atoll(argv[3]) * 1000u;
    ab_ns = (uint64_t)atoll(argv[4]) * 1000u;
    if (pipe(request) != 0 || pipe(reply) != 0) abort();
    printf("ready pid=%d\n", getpid());
    fflush(stdout);

    char line[64];
    if (!fgets(line, sizeof line, stdin) || strncmp(line, "go", 2) != 0) return 1;
    started_ns = ns(CLOCK_MONOTONIC);
    void *(*mains[3])(void *) = {serial_a, serial_b, serial_c};
    if (!serial) {
        mains[0] = pipeline_a;
        mains[1] = pipeline_b;
        mains[2] = pipeline_c;
    }
    pthread_t threads[3];
    for (int i = 0; i < 3; i++) pthread_create(&threads[i], NULL, mains[i], NULL);
    struct timespec run = {(time_t)run_seconds,
                           (long)((run_seconds - (time_t)run_seconds) * 1e9)};
    nanosleep(&run, NULL);
    running = 0;
    for (int i = 0; i < 3; i++) pthread_join(threads[i], NULL);
    printf("rounds=%llu run_ns=%llu a=%d b=%d c=%d\n", (unsigned long long)rounds,
           (unsigned long long)(ended_ns - started_ns), a_tid, b_tid, c_tid);
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
    }
    return 0;
}

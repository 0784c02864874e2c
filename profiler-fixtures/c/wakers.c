/*
 * Who woke whom, built the way distributions build programs: plain
 * `cc -O2`, no frame-pointer flags, every wait inside glibc.
 *
 * Each thread is named as it is called here (pthread_setname_np).
 * Thread "producer": producer_compute() spins for 1 to 3 ms (drawn each
 * round), then producer_write() writes one byte to a pipe.
 * Thread "consumer": consumer_wait() reads one byte from that pipe; it
 * measures its off-CPU time in the read (wall minus its own CPU time), all
 * of it a wait for the producer.
 * Thread "sleeper": sleeper_nap() sleeps 3 ms (nanosleep): a timer wakes it.
 * Thread "disk": disk_read() reads 4 KiB with O_DIRECT at a random offset of
 * a 32 MiB file it wrote in the working directory: the disk's completion
 * wakes it. Its off-CPU time is measured the same way.
 *
 * Protocol (as the Rust fixtures): "ready pid=P producer=T consumer=T
 * sleeper=T disk=T", wait for "go", run for argv[1] seconds, print the
 * measurements, then linger until stdin closes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FILE_BYTES (32u << 20)
#define BLOCK 4096u

static volatile int running = 1;
static uint64_t consumer_ns, consumer_reads, sleeper_ns, disk_ns, disk_reads;
static int pipe_fds[2];
static int disk_fd = -1;

static uint64_t ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

static uint64_t sink;

__attribute__((noinline)) void producer_compute(uint64_t until_cpu_ns) {
    uint64_t x = until_cpu_ns;
    while (ns(CLOCK_THREAD_CPUTIME_ID) < until_cpu_ns) {
        for (int i = 0; i < 1000; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            __asm__ volatile("" : "+r"(x));
        }
    }
    sink += x;
}

__attribute__((noinline)) void producer_write(void) {
    if (write(pipe_fds[1], "x", 1) != 1) abort();
}

__attribute__((noinline)) void consumer_wait(void) {
    char byte;
    OFF_CPU(consumer_ns, if (read(pipe_fds[0], &byte, 1) != 1) abort());
    consumer_reads++;
}

__attribute__((noinline)) void sleeper_nap(void) {
    struct timespec three_ms = {0, 3000000};
    OFF_CPU(sleeper_ns, nanosleep(&three_ms, NULL));
}

__attribute__((noinline)) void disk_read(uint64_t block) {
    static char *buffer;
    if (!buffer && posix_memalign((void **)&buffer, BLOCK, BLOCK) != 0) abort();
    OFF_CPU(disk_ns, if (pread(disk_fd, buffer, BLOCK, (off_t)(block * BLOCK)) !=
                         (ssize_t)BLOCK) abort());
    disk_reads++;
}

static pthread_mutex_t tid_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tid_cond = PTHREAD_COND_INITIALIZER;
static pid_t producer_tid, consumer_tid, sleeper_tid, disk_tid;
static int go;

static void wait_go(pid_t *tid, const char *name) {
    pthread_setname_np(pthread_self(), name);
    pthread_mutex_lock(&tid_lock);
    *tid = (pid_t)syscall(SYS_gettid);
    pthread_cond_broadcast(&tid_cond);
    while (!go) pthread_cond_wait(&tid_cond, &tid_lock);
    pthread_mutex_unlock(&tid_lock);
}

static void *producer_main(void *arg) {
    (void)arg;
    wait_go(&producer_tid, "producer");
    uint64_t seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15u + ns(CLOCK_MONOTONIC);
    while (running) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        uint64_t work = 1000000 + (seed >> 33) % 2000000;
        producer_compute(ns(CLOCK_THREAD_CPUTIME_ID) + work);
        producer_write();
    }
    /* The consumer's last read. */
    producer_write();
    return NULL;
}

static void *consumer_main(void *arg) {
    (void)arg;
    wait_go(&consumer_tid, "consumer");
    while (running) consumer_wait();
    return NULL;
}

static void *sleeper_main(void *arg) {
    (void)arg;
    wait_go(&sleeper_tid, "sleeper");
    while (running) sleeper_nap();
    return NULL;
}

static void *disk_main(void *arg) {
    (void)arg;
    wait_go(&disk_tid, "disk");
    uint64_t seed = (uint64_t)getpid() * 0xbf58476d1ce4e5b9u;
    while (running) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        disk_read((seed >> 33) % (FILE_BYTES / BLOCK));
    }
    return NULL;
}

/* The file disk_read reads: written, synced, dropped from the page cache. */
static void make_file(void) {
    const char *name = "wakers.data";
    int fd = open(name, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0) abort();
    static char chunk[1 << 16];
    memset(chunk, 'w', sizeof chunk);
    for (unsigned done = 0; done < FILE_BYTES; done += sizeof chunk)
        if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) abort();
    if (fsync(fd) != 0) abort();
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    disk_fd = open(name, O_RDONLY | O_DIRECT);
    if (disk_fd < 0) abort();
}

int main(int argc, char **argv) {
    double run_seconds = argc > 1 ? atof(argv[1]) : 5.0;
    if (pipe(pipe_fds) != 0) abort();
    make_file();
    pthread_t producer, consumer, sleeper, disk;
    pthread_create(&producer, NULL, producer_main, NULL);
    pthread_create(&consumer, NULL, consumer_main, NULL);
    pthread_create(&sleeper, NULL, sleeper_main, NULL);
    pthread_create(&disk, NULL, disk_main, NULL);
    pthread_mutex_lock(&tid_lock);
    while (!producer_tid || !consumer_tid || !sleeper_tid || !disk_tid)
        pthread_cond_wait(&tid_cond, &tid_lock);
    pthread_mutex_unlock(&tid_lock);
    printf("ready pid=%d producer=%d consumer=%d sleeper=%d disk=%d\n", getpid(),
           producer_tid, consumer_tid, sleeper_tid, disk_tid);
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
    pthread_join(producer, NULL);
    pthread_join(consumer, NULL);
    pthread_join(sleeper, NULL);
    pthread_join(disk, NULL);
    printf("consumer_ns=%llu consumer_reads=%llu sleeper_ns=%llu disk_ns=%llu "
           "disk_reads=%llu\n",
           (unsigned long long)consumer_ns, (unsigned long long)consumer_reads,
           (unsigned long long)sleeper_ns, (unsigned long long)disk_ns,
           (unsigned long long)disk_reads);
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
    }
    unlink("wakers.data");
    return 0;
}

/*
 * A process whose exec comes from a thread other than the leader, as Go's
 * syscall.Exec does from whatever thread runs the goroutine: the main
 * thread waits in pthread_join while a worker sleeps 50 ms, prints
 * "thread_exec pid=P tid=T" (the worker's tid), then execs argv[1]
 * with the arguments after it. The exec ends every other thread and the
 * worker takes the pid as its tid. Plain `cc -O2`, no frame pointers.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static char **program;

static void *worker(void *arg) {
    (void)arg;
    struct timespec wait = {0, 50000000};
    nanosleep(&wait, NULL);
    printf("thread_exec pid=%d tid=%ld\n", getpid(), (long)syscall(SYS_gettid));
    fflush(stdout);
    execv(program[0], program);
    perror("execv");
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: thread_exec PROGRAM [ARGS...]\n");
        return 2;
    }
    program = argv + 1;
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker, NULL) != 0) return 1;
    pthread_join(thread, NULL);
    return 1; /* only if the exec failed */
}

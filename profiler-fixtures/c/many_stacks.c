/*
 * More distinct stacks in one window than the kernel maps hold.
 *
 * Thread "walker" visits every path of a binary call tree DEPTH levels deep
 * (argv[1], default 15: 32,768 paths). Each level calls `left` or `right`
 * from one of two call sites, so every path is a different stack, and each
 * leaf sleeps 100 us: one off-CPU interval per path, ~7,000 distinct stacks
 * a second. Plain `cc -O2`; the work after each call keeps it a real call
 * (not a tail jump), as in most code.
 *
 * Protocol (as the other fixtures): "ready pid=P walker=T", wait for "go",
 * walk, print "leaves=N", then linger until stdin closes.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static unsigned long leaves;

__attribute__((noinline)) void leaf(void) {
    struct timespec pause = {0, 100000};
    nanosleep(&pause, NULL);
    leaves++;
}

void left(int depth, unsigned path);
void right(int depth, unsigned path);

static inline void step(int depth, unsigned path) {
    if (depth == 0)
        leaf();
    else if (path & 1)
        left(depth - 1, path >> 1);
    else
        right(depth - 1, path >> 1);
}

__attribute__((noinline)) void left(int depth, unsigned path) {
    step(depth, path);
    sink += 1;
}

__attribute__((noinline)) void right(int depth, unsigned path) {
    step(depth, path);
    sink += 2;
}

int main(int argc, char **argv) {
    int depth = argc > 1 ? atoi(argv[1]) : 15;
    printf("ready pid=%d walker=%ld\n", getpid(), (long)syscall(SYS_gettid));
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin) || strncmp(line, "go", 2) != 0) return 1;
    for (unsigned path = 0; path < (1u << depth); path++) step(depth, path);
    printf("leaves=%lu\n", leaves);
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
    }
    return 0;
}

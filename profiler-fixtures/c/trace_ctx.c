/*
 * A traced C service in miniature, publishing OpenTelemetry's thread
 * context as OTEP 4947 specifies, through its SDK's native part
 * (otel_thread_ctx.c): built into the program, linked as a shared
 * library, or (built with -DCTX_DLOPEN) a shared library loaded with
 * dlopen from the path in TRACE_CTX_LIBRARY, as a JVM loads a tracer's
 * JNI library.
 *
 * Thread "worker", in turn:
 *   - span "checkout" (trace 0af7651916cd43dd8448eb211c80319c, span
 *     b7ad6b7169203331, attributes http_route=/checkout,
 *     http_method=POST): handle_checkout spins 3 units, then sleeps 2 ms
 *     in nanosleep;
 *   - span "search" (trace 4bf92f3577b34da6a3ce929d0e0e4736, span
 *     00f067aa0ba902b7, /search, GET): handle_search spins 1 unit;
 *   - no span: between_requests spins 1 unit.
 * Each measures its CPU time and the sleep its wall time.
 *
 * Thread "other" spins in handle_report under its own span (trace
 * 5b8aa5a2d2c872e8321cf37308d69df2, span 051581bf3cb55c13, /report, GET)
 * all along: no
 * sample of either thread may carry the other's.
 *
 * Thread "torn" keeps a record attached whose valid flag is 0, as a
 * writer caught mid-write leaves it, and alternates handle_torn's spin
 * with 1 ms sleeps: its ids must never be read.
 *
 * The process also publishes its context as OTEP 4719 specifies (a
 * memfd mapping named OTEL_CTX: the header, then a protobuf
 * ProcessContext: its Resource with service.name=checkout-service,
 * service.instance.id=instance-7 and deployment.environment.name=test,
 * and the extra attributes OTEP 4947 asks for, the records' attribute
 * names by index: http_route, http_method), before it says it is ready.
 *
 * Protocol (as the Rust fixtures): "ready pid=P worker=T other=T torn=T", wait for "go",
 * run for argv[1] seconds, print the measurements, then linger until
 * stdin closes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "otel_thread_ctx.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

/* OTEP 4719's header. */
struct process_ctx {
    char signature[8];
    uint32_t version;
    uint32_t payload_size;
    uint64_t published_at_ns;
    const uint8_t *payload;
};

/* Appends a length-delimited protobuf field (lengths below 16384). */
static size_t field(uint8_t *out, uint8_t tag, const uint8_t *bytes, size_t len) {
    size_t at = 0;
    out[at++] = tag;
    if (len >= 128)
        out[at++] = (uint8_t)(0x80 | (len & 0x7f));
    out[at++] = (uint8_t)(len >= 128 ? len >> 7 : len);
    memcpy(out + at, bytes, len);
    return at + len;
}

/* A KeyValue{key, AnyValue{string_value}}. */
static size_t key_value(uint8_t *out, const char *key, const char *value) {
    uint8_t any[128];
    size_t any_len = field(any, 0x0a, (const uint8_t *)value, strlen(value));
    size_t len = field(out, 0x0a, (const uint8_t *)key, strlen(key));
    return len + field(out + len, 0x12, any, any_len);
}

/* A repeated KeyValue field `tag` of the key and value. */
static size_t attribute(uint8_t *out, uint8_t tag, const char *key, const char *value) {
    uint8_t kv[256];
    return field(out, tag, kv, key_value(kv, key, value));
}

/* The record attributes' names by index, as OTEP 4947 asks: the extra
 * attribute threadlocal.attribute_key_map, an AnyValue{array_value:
 * ArrayValue{values: [AnyValue{string_value}]}}. */
static size_t key_map(uint8_t *out, const char *const *names, size_t count) {
    uint8_t values[256], array[256], any[256], kv[512];
    size_t len = 0;
    for (size_t i = 0; i < count; i++) {
        uint8_t name[64];
        size_t n = strlen(names[i]);
        if (n > 60)
            exit(2);
        size_t name_len = field(name, 0x0a, (const uint8_t *)names[i], n);
        len += field(values + len, 0x0a, name, name_len);
    }
    size_t array_len = field(array, 0x2a, values, len);
    memcpy(any, array, array_len);
    const char *key = "threadlocal.attribute_key_map";
    size_t kv_len = field(kv, 0x0a, (const uint8_t *)key, strlen(key));
    kv_len += field(kv + kv_len, 0x12, any, array_len);
    return field(out, 0x12, kv, kv_len);
}

static void publish_process_ctx(void) {
    int fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror("memfd");
        exit(1);
    }
    uint8_t *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    close(fd);
    madvise(page, 4096, MADV_DONTFORK);
    struct process_ctx *ctx = (struct process_ctx *)page;
    uint8_t *payload = page + sizeof *ctx;
    /* ProcessContext{resource = 1: Resource{attributes = 1}, extra_attributes = 2}. */
    uint8_t resource[512];
    size_t resource_len = attribute(resource, 0x0a, "service.name", "checkout-service");
    resource_len += attribute(resource + resource_len, 0x0a, "service.instance.id", "instance-7");
    resource_len += attribute(resource + resource_len, 0x0a, "deployment.environment.name", "test");
    size_t len = field(payload, 0x0a, resource, resource_len);
    len += attribute(payload + len, 0x12, "threadlocal.schema_version", "tlsdesc_v1_dev");
    static const char *const names[] = {"http_route", "http_method"};
    len += key_map(payload + len, names, 2);
    ctx->version = 2;
    ctx->payload_size = (uint32_t)len;
    ctx->payload = payload;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    ctx->published_at_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    atomic_thread_fence(memory_order_seq_cst);
    memcpy(ctx->signature, "OTEL_CTX", 8);
    prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, page, 4096, "OTEL_CTX");
}

static double run_seconds;
static uint64_t checkout_ns, search_ns, between_ns, checkout_sleep_ns;

static uint64_t ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void hex(uint8_t *out, const char *text, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned byte;
        sscanf(text + 2 * i, "%2x", &byte);
        out[i] = (uint8_t)byte;
    }
}

/* Appends attribute `key` (an index into the key map) to `r`. */
static void add_attr(struct record *r, uint8_t key, const char *value) {
    size_t len = strlen(value);
    r->attrs[r->attrs_size] = key;
    r->attrs[r->attrs_size + 1] = (uint8_t)len;
    memcpy(r->attrs + r->attrs_size + 2, value, len);
    r->attrs_size = (uint16_t)(r->attrs_size + 2 + len);
}

static void make(struct record *r, const char *trace, const char *span, const char *route,
                 const char *method) {
    memset(r, 0, sizeof *r);
    hex(r->trace_id, trace, 16);
    hex(r->span_id, span, 8);
    r->trace_flags = 1;
    add_attr(r, 0, route);  /* http_route */
    add_attr(r, 1, method); /* http_method */
    atomic_signal_fence(memory_order_seq_cst);
    r->valid = 1;
}

/* The SDK's attach (and detach, with NULL). */
#ifdef CTX_DLOPEN
static void (*attach)(struct record *r);

static void load_sdk(void) {
    const char *path = getenv("TRACE_CTX_LIBRARY");
    void *library = path ? dlopen(path, RTLD_NOW) : NULL;
    attach = library ? (void (*)(struct record *))dlsym(library, "otel_ctx_attach") : NULL;
    if (!attach) {
        fprintf(stderr, "trace_ctx: no SDK in TRACE_CTX_LIBRARY: %s\n", dlerror());
        exit(1);
    }
}
#else
#define attach otel_ctx_attach
static void load_sdk(void) {}
#endif

__attribute__((noinline)) uint64_t spin(uint64_t iterations) {
    uint64_t x = iterations;
    for (uint64_t i = 0; i < iterations; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static uint64_t sink;

__attribute__((noinline)) void handle_checkout(uint64_t unit) {
    uint64_t start = ns(CLOCK_THREAD_CPUTIME_ID);
    sink += spin(3 * unit);
    checkout_ns += ns(CLOCK_THREAD_CPUTIME_ID) - start;
    struct timespec nap = {0, 2000000};
    uint64_t slept = ns(CLOCK_MONOTONIC);
    nanosleep(&nap, NULL);
    checkout_sleep_ns += ns(CLOCK_MONOTONIC) - slept;
}

__attribute__((noinline)) void handle_search(uint64_t unit) {
    uint64_t start = ns(CLOCK_THREAD_CPUTIME_ID);
    sink += spin(unit);
    search_ns += ns(CLOCK_THREAD_CPUTIME_ID) - start;
}

__attribute__((noinline)) void between_requests(uint64_t unit) {
    uint64_t start = ns(CLOCK_THREAD_CPUTIME_ID);
    sink += spin(unit);
    between_ns += ns(CLOCK_THREAD_CPUTIME_ID) - start;
}

__attribute__((noinline)) void handle_report(uint64_t unit) {
    sink += spin(unit);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int started, worker_tid, other_tid, torn_tid;
static volatile int stopping;

/* Waits for "go", having said its tid in `tid`. */
static void wait_start(int *tid) {
    pthread_mutex_lock(&lock);
    *tid = (int)syscall(SYS_gettid);
    pthread_cond_broadcast(&cond);
    while (!started)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static void *other(void *arg) {
    (void)arg;
    static struct record report;
    make(&report, "5b8aa5a2d2c872e8321cf37308d69df2", "051581bf3cb55c13", "/report", "GET");
    wait_start(&other_tid);
    attach(&report);
    while (!stopping)
        handle_report(400000);
    attach(NULL);
    return NULL;
}

__attribute__((noinline)) void handle_torn(uint64_t unit) {
    sink += spin(unit);
}

static void *torn(void *arg) {
    (void)arg;
    static struct record half;
    make(&half, "9f2a6c0d41b83e57a1c4d2e6f8091a3b", "7c1e5a9b3d2f4068", "/torn", "GET");
    half.valid = 0;
    wait_start(&torn_tid);
    attach(&half);
    struct timespec nap = {0, 1000000};
    while (!stopping) {
        handle_torn(100000);
        nanosleep(&nap, NULL);
    }
    attach(NULL);
    return NULL;
}

static void *worker(void *arg) {
    (void)arg;
    static struct record checkout, search;
    make(&checkout, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "/checkout", "POST");
    make(&search, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "/search", "GET");
    wait_start(&worker_tid);
    uint64_t end = ns(CLOCK_MONOTONIC) + (uint64_t)(run_seconds * 1e9);
    const uint64_t unit = 400000;
    while (ns(CLOCK_MONOTONIC) < end) {
        attach(&checkout);
        handle_checkout(unit);
        attach(&search);
        handle_search(unit);
        attach(NULL);
        between_requests(unit);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2 || (run_seconds = atof(argv[1])) <= 0) {
        fprintf(stderr, "usage: trace_ctx SECONDS\n");
        return 2;
    }
    load_sdk();
    publish_process_ctx();
    pthread_t thread, other_thread, torn_thread;
    pthread_create(&thread, NULL, worker, NULL);
    pthread_create(&other_thread, NULL, other, NULL);
    pthread_create(&torn_thread, NULL, torn, NULL);
    pthread_mutex_lock(&lock);
    while (!worker_tid || !other_tid || !torn_tid)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    printf("ready pid=%d worker=%d other=%d torn=%d\n", getpid(), worker_tid, other_tid, torn_tid);
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin))
        return 1;
    pthread_mutex_lock(&lock);
    started = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    pthread_join(thread, NULL);
    stopping = 1;
    pthread_join(other_thread, NULL);
    pthread_join(torn_thread, NULL);
    printf("checkout_ns=%llu search_ns=%llu between_ns=%llu checkout_sleep_ns=%llu\n",
           (unsigned long long)checkout_ns, (unsigned long long)search_ns,
           (unsigned long long)between_ns, (unsigned long long)checkout_sleep_ns);
    fflush(stdout);
    while (fgets(line, sizeof line, stdin))
        ;
    return 0;
}

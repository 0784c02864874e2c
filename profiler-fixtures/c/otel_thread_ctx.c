/*
 * The thread-local an SDK publishes (see otel_thread_ctx.h), exported in
 * the dynamic symbol table: a shared library exports it as it is; a
 * program that defines it is linked with
 * `-Wl,--export-dynamic-symbol=otel_thread_ctx_v1`. A library built with
 * `-fPIC` reaches it through the dynamic linker (global dynamic, or
 * TLSDESC with `-mtls-dialect=gnu2`, as the specification recommends).
 */
#include <stdatomic.h>
#include <stddef.h>

#include "otel_thread_ctx.h"

__thread struct record *otel_thread_ctx_v1;

void otel_ctx_attach(struct record *r) {
    atomic_signal_fence(memory_order_seq_cst);
    *(struct record *volatile *)&otel_thread_ctx_v1 = r;
    atomic_signal_fence(memory_order_seq_cst);
}

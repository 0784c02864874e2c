/*
 * An OpenTelemetry SDK's native part in miniature (OTEP 4947): the
 * thread-local `otel_thread_ctx_v1` points at the record of the span the
 * thread runs in, NULL between spans. `otel_thread_ctx.c` defines it, in
 * the program or in a shared library (loaded at start or by dlopen).
 */
#ifndef OTEL_THREAD_CTX_H
#define OTEL_THREAD_CTX_H

#include <stdint.h>

/* The record: 28 bytes, then the attributes (key index, length, value). */
struct record {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t valid;
    uint8_t trace_flags;
    uint16_t attrs_size;
    uint8_t attrs[32];
} __attribute__((packed, aligned(8)));

/* Attaches `r` to the calling thread (NULL: detaches). */
void otel_ctx_attach(struct record *r);

#endif

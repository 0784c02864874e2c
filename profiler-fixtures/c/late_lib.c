/*
 * The library that late.c loads with dlopen once its measured phase
 * starts: built with plain `cc -O2 -shared -fPIC`, no frame pointers.
 * lib_heavy and lib_light call the same frameless leaf, lib_spin, with 3:1
 * work.
 */
#include <stdint.h>

__attribute__((noinline)) uint64_t lib_spin(uint64_t iterations) {
    uint64_t x = iterations;
    for (uint64_t i = 0; i < iterations; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

__attribute__((noinline)) uint64_t lib_heavy(uint64_t unit) { return lib_spin(3 * unit) + 1; }

__attribute__((noinline)) uint64_t lib_light(uint64_t unit) { return lib_spin(unit) + 2; }

/* attn bench peak: the machine's practical float32 ceiling at each level of attn_isa. Every thread
 * runs fused multiply-adds on independent chains held in registers (the level's widest vectors),
 * nothing loaded or stored, so no kernel of that level that does real work can go faster.
 * bench_peak.c is compiled once per level (cli/CMakeLists.txt), each copy with its -march. */
#ifndef ATTN_CLI_BENCH_PEAK_H
#define ATTN_CLI_BENCH_PEAK_H

#include "attn.h"

#include <stdbool.h>

enum {
    BENCH_PEAK_MAX_THREADS = 64
};

typedef struct bench_peak_loop {
    attn_isa level;           /* the vectors of the level's kernels */
    int lanes;                /* floats per vector */
    double flop_per_thread;   /* floating-point operations of one thread's loop */
    bool (*run)(int threads); /* the loop on `threads` threads at once (at most
                                 BENCH_PEAK_MAX_THREADS); false when a thread could not start */
} bench_peak_loop;

/* The loops this program has, lowest level first; *count of them. */
const bench_peak_loop *const *bench_peak_loops(int *count);

#endif

/* attn bench peak: the machine's practical float32 ceiling. Every thread runs fused multiply-adds
 * on independent chains held in registers (the widest vectors the build targets), nothing loaded
 * or stored, so no kernel that does real work can go faster. */
#ifndef ATTN_CLI_BENCH_PEAK_H
#define ATTN_CLI_BENCH_PEAK_H

#include <stdbool.h>

enum { BENCH_PEAK_MAX_THREADS = 64 };

/* Floating-point operations one thread's loop performs. */
double bench_peak_flop_per_thread(void);
/* Runs the loop on `threads` threads at once (at most BENCH_PEAK_MAX_THREADS); false when a
 * thread could not start. */
bool bench_peak_fma(int threads);

#endif

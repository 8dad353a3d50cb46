/* Shared pieces of the fuzz targets: a private temporary folder (in /dev/shm when there is one,
 * removed at exit), writing the input to files (plain or gzip), and invariant checks that abort
 * so libFuzzer records the input. */
#ifndef ATTN_FUZZ_COMMON_H
#define ATTN_FUZZ_COMMON_H

#include "attn.h"
#include "attn_data.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The folder (created on first use). */
const char *fuzz_dir(void);
/* fuzz_dir()/name into buf. */
const char *fuzz_path(char *buf, size_t len, const char *name);
/* Writes data to path (plain, or gzip-compressed); false on failure (out of disk: skip). */
bool fuzz_write(const char *path, const void *data, size_t n);
bool fuzz_write_gz(const char *path, const void *data, size_t n);
/* Aborts with a message when cond is false: an invariant of the library was broken. */
void fuzz_require(bool cond, const char *what);

#endif

/* One level's table of kernels (dispatch_internal.h), compiled with each level's flags and ATTN_ISA: the
 * names below are that level's copies. */
#include "dispatch_internal.h"

#define ATTN_KERNEL_ENTRY(ret, name, params, args) .name = name,
const attn__kernel_table ATTN_ISA_TABLE = {ATTN_KERNELS(ATTN_KERNEL_ENTRY)};

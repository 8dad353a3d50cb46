/* Private: the kernels' levels, the one list of them. Each is this folder's kernel files compiled
 * once more with the level's compiler options (dispatch_internal.h); CMakeLists.txt reads the
 * rows below (one per line, as written) to build the levels of the architecture it builds for
 * whose options the compiler takes, and dispatch.c to name them and to find their tables.
 *   X(attn_isa constant, name, architecture that runs it (any: every one), compiler options)
 * In the order of attn_isa (include/attn.h); the levels of one architecture rise down the list,
 * and a CPU may lack a level under one it has (aarch64: sve and neon_bf16 each without the other).
 * ATTN_PORTABLE_SIMD: simd_internal.h's portable vectors, whatever the compiler targets. */
#ifndef ATTN_KERNELS_LEVELS_H
#define ATTN_KERNELS_LEVELS_H

#define ATTN_LEVELS(X)                                                                                                 \
    X(ATTN_ISA_BASELINE, baseline, any, "-DATTN_PORTABLE_SIMD")                                                        \
    X(ATTN_ISA_AVX2, avx2, x86_64, "-march=x86-64-v3")                                                                 \
    X(ATTN_ISA_AVX512, avx512, x86_64, "-march=x86-64-v4")                                                             \
    X(ATTN_ISA_AVX512_BF16, avx512_bf16, x86_64, "-march=x86-64-v4 -mavx512bf16")                                      \
    X(ATTN_ISA_NEON, neon, aarch64, "")                                                                                \
    X(ATTN_ISA_SVE, sve, aarch64, "-march=armv8.2-a+sve")                                                              \
    X(ATTN_ISA_NEON_BF16, neon_bf16, aarch64, "-march=armv8.2-a+bf16")

#endif

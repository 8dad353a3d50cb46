/* The kernels' level (attn_cpu_isa): decoding cpuid words of the CPUs this project runs on,
 * agreement with GCC's own detection on this host, the ATTN_CPU_ISA cap (ctest runs the suite
 * under each level), attn_cpu_isa_set_max, and every level's kernels against their references. */
#include "kernels/dispatch_internal.h"
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

/* An AMD EPYC of Zen 4 (family 0x19), read off one of this project's machines: AVX-512 with BF16,
 * the OS saving the ZMM state (XCR0 0xe7). */
static const attn__cpuid_words zen4 = {.leaf1_ecx = 0xfed83203u,
                                       .leaf7_ebx = 0xf1bb03a9u,
                                       .leaf7_1_eax = 0x30u,
                                       .ext1_ecx = 0x440001f1u,
                                       .xcr0 = 0xe7u,
                                       .vendor = "AuthenticAMD"};
/* An Intel Xeon with AMX (family 6, model 0xa7 as the KVM guest reports it), read off another:
 * AVX-512 with BF16, AMX-BF16 and AMX-TILE (leaf 7 EDX bits 22, 24), XCR0 with the AMX tile state
 * (bits 17, 18) */
static const attn__cpuid_words xeon_amx = {.leaf1_ecx = 0xfffa3203u,
                                           .leaf7_ebx = 0xf1bf2ffbu,
                                           .leaf7_edx = 0x23c14010u,
                                           .leaf7_1_eax = 0x1c30u,
                                           .ext1_ecx = 0x00000121u,
                                           .xcr0 = 0x600e7u,
                                           .vendor = "GenuineIntel"};
/* AVX-512 F (16), DQ (17), IFMA (21), CD (28), BW (30), VL (31) in leaf 7 EBX */
#define AVX512_EBX 0xd1230000u

static void decoding(void)
{
    attn__cpuid_words w = zen4;
    TK_CHECK(attn__isa_from_cpuid(&w) == ATTN_ISA_AVX512_BF16, "Zen 4 decodes as avx512_bf16");
    TK_CHECK(attn__bf16_dot_fast_from_cpuid(&w), "Zen 4: bf16 dot products faster than float32 FMAs");
    TK_CHECK(attn__isa_from_cpuid(&xeon_amx) == ATTN_ISA_AVX512_BF16, "the Xeon with AMX decodes as avx512_bf16");
    TK_CHECK(!attn__bf16_dot_fast_from_cpuid(&xeon_amx), "the Xeon with AMX: bf16 dot products no faster");
    TK_CHECK(attn__amx_from_cpuid(&xeon_amx), "the Xeon with AMX: AMX tiles with bf16 products");
    TK_CHECK(!attn__amx_from_cpuid(&zen4), "Zen 4: no AMX");
    attn__cpuid_words x = xeon_amx;
    x.xcr0 &= ~(1ull << 18); /* the OS does not save the tile data */
    TK_CHECK(!attn__amx_from_cpuid(&x), "AMX without the OS's XTILEDATA state: none");
    x = xeon_amx;
    x.leaf7_edx &= ~(1u << 22);
    TK_CHECK(!attn__amx_from_cpuid(&x), "AMX tiles without AMX-BF16: none");
    w.leaf7_1_eax &= ~0x20u;
    TK_CHECK(attn__isa_from_cpuid(&w) == ATTN_ISA_AVX512, "without AVX512_BF16: avx512");
    w = zen4; /* a Zen 2 or 3 EPYC: no AVX-512 bits, XCR0 without the ZMM state */
    w.leaf7_ebx &= ~AVX512_EBX, w.leaf7_1_eax &= ~0x20u, w.xcr0 = 0x7;
    TK_CHECK(attn__isa_from_cpuid(&w) == ATTN_ISA_AVX2, "an AVX2-only EPYC decodes as avx2");
    w = zen4; /* the CPU has AVX-512 but the OS does not save the ZMM registers */
    w.xcr0 = 0x7;
    TK_CHECK(attn__isa_from_cpuid(&w) == ATTN_ISA_AVX2, "AVX-512 without the OS's ZMM state: avx2");
    w.xcr0 = 0x3; /* nor the YMM registers */
    TK_CHECK(attn__isa_from_cpuid(&w) == ATTN_ISA_BASELINE, "AVX without the OS's YMM state: baseline");
    w = zen4;
    w.leaf1_ecx &= ~(1u << 27); /* no OSXSAVE: XCR0 is not to be trusted */
    TK_CHECK(attn__isa_from_cpuid(&w) == ATTN_ISA_BASELINE, "without OSXSAVE: baseline");
    const struct {
        const char *name;
        uint32_t *word;
        uint32_t bit;
        attn_isa expect;
    } missing[] = {
        {"AVX512BW", &w.leaf7_ebx, 30, ATTN_ISA_AVX2}, {"AVX512VL", &w.leaf7_ebx, 31, ATTN_ISA_AVX2},
        {"AVX512DQ", &w.leaf7_ebx, 17, ATTN_ISA_AVX2}, {"AVX512CD", &w.leaf7_ebx, 28, ATTN_ISA_AVX2},
        {"FMA", &w.leaf1_ecx, 12, ATTN_ISA_BASELINE},  {"AVX2", &w.leaf7_ebx, 5, ATTN_ISA_BASELINE},
        {"BMI2", &w.leaf7_ebx, 8, ATTN_ISA_BASELINE},  {"LZCNT", &w.ext1_ecx, 5, ATTN_ISA_BASELINE},
        {"F16C", &w.leaf1_ecx, 29, ATTN_ISA_BASELINE}, {"MOVBE", &w.leaf1_ecx, 22, ATTN_ISA_BASELINE},
    };
    for (size_t i = 0; i < sizeof missing / sizeof *missing; i++) {
        w = zen4;
        *missing[i].word &= ~(1u << missing[i].bit);
        attn_isa got = attn__isa_from_cpuid(&w);
        TK_CHECK(got == missing[i].expect, "Zen 4 without %s decodes as %s, got %s", missing[i].name,
                 attn_isa_name(missing[i].expect), attn_isa_name(got));
    }
}

/* aarch64's AT_HWCAP and AT_HWCAP2 words as qemu-aarch64 7.2 reports them for its CPU models
 * (HWCAP: ASIMD bit 1, SVE bit 22; HWCAP2: BF16 bit 14), the levels they allow, and the level
 * chosen under each cap: the highest the CPU has at or under it, though a level under one it has
 * may be missing (max,sve=off has BF16 without SVE, as Apple's M2; a64fx SVE without BF16). */
static void decoding_hwcap(void)
{
    enum {
        B = 1 << ATTN_ISA_BASELINE,
        NEON = 1 << ATTN_ISA_NEON,
        SVE = 1 << ATTN_ISA_SVE,
        BF16 = 1 << ATTN_ISA_NEON_BF16
    };
    const struct {
        const char *cpu;
        uint64_t hwcap, hwcap2;
        unsigned levels;
        attn_isa capped_at_sve, capped_at_bf16; /* the choice under ATTN_CPU_ISA=sve and =neon_bf16 */
    } cpus[] = {
        {"cortex-a53", 0x8fb, 0, B | NEON, ATTN_ISA_NEON, ATTN_ISA_NEON},
        {"neoverse-n1", 0x119ffb, 0, B | NEON, ATTN_ISA_NEON, ATTN_ISA_NEON},
        {"a64fx (SVE)", 0x415ffb, 0, B | NEON | SVE, ATTN_ISA_SVE, ATTN_ISA_SVE},
        {"max (SVE2, BF16)", 0xecfffffbu, 0x7f877fff, B | NEON | SVE | BF16, ATTN_ISA_SVE, ATTN_ISA_NEON_BF16},
        {"max,sve=off (BF16)", 0xecbffffbu, 0x76181, B | NEON | BF16, ATTN_ISA_NEON, ATTN_ISA_NEON_BF16},
        {"no AdvSIMD", 0x1, 0x4000, B, ATTN_ISA_BASELINE, ATTN_ISA_BASELINE},
        {"SVE without AdvSIMD", 0x400001, 0, B, ATTN_ISA_BASELINE, ATTN_ISA_BASELINE},
    };
    for (size_t i = 0; i < sizeof cpus / sizeof *cpus; i++) {
        const unsigned got = attn__isa_levels_from_hwcap(cpus[i].hwcap, cpus[i].hwcap2);
        TK_CHECK(got == cpus[i].levels, "%s (HWCAP %#llx, HWCAP2 %#llx) allows levels %#x, got %#x", cpus[i].cpu,
                 (unsigned long long)cpus[i].hwcap, (unsigned long long)cpus[i].hwcap2, cpus[i].levels, got);
        const attn_isa sve = attn__isa_highest(got, ATTN_ISA_SVE), bf16 = attn__isa_highest(got, ATTN_ISA_NEON_BF16);
        TK_CHECK(sve == cpus[i].capped_at_sve && bf16 == cpus[i].capped_at_bf16,
                 "%s: capped at sve runs %s (expected %s), at neon_bf16 %s (expected %s)", cpus[i].cpu,
                 attn_isa_name(sve), attn_isa_name(cpus[i].capped_at_sve), attn_isa_name(bf16),
                 attn_isa_name(cpus[i].capped_at_bf16));
    }
}

#ifdef ATTN_TEST_DISPATCH
/* The levels this build and CPU support, bit l for level l */
static unsigned supported_levels(void)
{
    unsigned levels = 0;
    for (int l = 0; l < ATTN_ISA_COUNT; l++) levels |= (unsigned)attn_cpu_isa_supported((attn_isa)l) << l;
    return levels;
}
#endif

static attn_isa best_supported(void)
{
    attn_isa best = ATTN_ISA_BASELINE;
    for (int l = 0; l < ATTN_ISA_COUNT; l++)
        if (attn_cpu_isa_supported((attn_isa)l)) best = (attn_isa)l;
    return best;
}

/* This host as GCC's libgcc sees it (which checks XCR0 for AVX and AVX-512 itself); on aarch64, as
 * the auxiliary vector says, read here. */
static attn_isa gcc_level(void)
{
#if defined(__aarch64__) && defined(__linux__)
    return getauxval(AT_HWCAP2) & HWCAP2_BF16 ? ATTN_ISA_NEON_BF16
           : getauxval(AT_HWCAP) & HWCAP_SVE  ? ATTN_ISA_SVE
                                              : ATTN_ISA_NEON;
#elif !defined(__x86_64__)
    return best_supported();
#else
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4"))
        return __builtin_cpu_supports("avx512bf16") ? ATTN_ISA_AVX512_BF16 : ATTN_ISA_AVX512;
    return __builtin_cpu_supports("x86-64-v3") ? ATTN_ISA_AVX2 : ATTN_ISA_BASELINE;
#endif
}

static void this_host(void)
{
    const attn_isa best = best_supported(), gcc = gcc_level();
    printf("test_cpu_isa: this CPU: %s (GCC: %s); kernels at %s", attn_isa_name(best), attn_isa_name(gcc),
           attn_isa_name(attn_cpu_isa()));
    const char *cap = getenv("ATTN_CPU_ISA");
    printf("%s%s\n", cap ? ", ATTN_CPU_ISA=" : "", cap ? cap : "");
#ifdef ATTN_TEST_DISPATCH
    /* a dispatching build has every level the CPU has (the bf16 one where the compiler has it) */
    TK_CHECK(best == gcc || (gcc == ATTN_ISA_AVX512_BF16 && best == ATTN_ISA_AVX512),
             "the best level supported (%s) is GCC's reading of this CPU (%s)", attn_isa_name(best),
             attn_isa_name(gcc));
#if defined(__aarch64__) && defined(__linux__)
    TK_CHECK(supported_levels() == attn__isa_levels_from_hwcap(getauxval(AT_HWCAP), getauxval(AT_HWCAP2)),
             "the levels supported (%#x) are those HWCAP and HWCAP2 allow", supported_levels());
#else
    for (int l = 0; l <= (int)best; l++)
        TK_CHECK(attn_cpu_isa_supported((attn_isa)l) == attn_isa_this_arch((attn_isa)l),
                 "level %s below the best is supported if it is this architecture's", attn_isa_name((attn_isa)l));
#endif
#endif
    TK_CHECK(best <= gcc, "no level above what the CPU has (%s > %s)", attn_isa_name(best), attn_isa_name(gcc));
    attn_isa want = best;
#ifdef ATTN_TEST_DISPATCH /* one level without dispatch: a cap changes nothing */
    attn_isa parsed;
    if (cap && attn_isa_from_name(cap, &parsed) == ATTN_OK && attn_isa_this_arch(parsed))
        want = attn__isa_highest(supported_levels(), parsed);
#endif
    TK_CHECK(attn_cpu_isa() == want, "kernels at %s, expected the highest supported under the cap, %s",
             attn_isa_name(attn_cpu_isa()), attn_isa_name(want));
    TK_CHECK(attn__kernels() == attn__kernels_at(attn_cpu_isa()), "the chosen table is the level's");
    /* MEDIUM's attention tiles take bf16 only with bf16 products, with VDPBF16PS on AMD's CPUs, on
     * AMX tiles where this process may use them, and with BFDOT at neon_bf16 */
#if defined(__x86_64__)
    __builtin_cpu_init();
    const bool amd = __builtin_cpu_is("amd");
#else
    const bool amd = false;
#endif
    const bool bfdot = attn_cpu_isa() == ATTN_ISA_NEON_BF16;
    TK_CHECK(attn_bf16_products() == (attn_cpu_isa() == ATTN_ISA_AVX512_BF16 || bfdot),
             "bf16 products (%d) at avx512_bf16 and neon_bf16", attn_bf16_products());
    TK_CHECK(attn_bf16_attention() == (attn_bf16_products() && (amd || attn__amx_usable() || bfdot)),
             "bf16 attention tiles (%d) = bf16 products (%d) on an AMD CPU (%d), with AMX (%d) or BFDOT (%d)",
             attn_bf16_attention(), attn_bf16_products(), amd, attn__amx_usable(), bfdot);
    TK_CHECK(attn__bf16_sums() == (attn_bf16_amx() ? SDPA_SUMS_AMX
                                   : bfdot         ? SDPA_SUMS_BFDOT
                                                   : SDPA_SUMS_DPBF16),
             "the attention's bf16 sums (%d) are AMX's with AMX, BFDOT's at neon_bf16, else VDPBF16PS's",
             (int)attn__bf16_sums());
    TK_CHECK(attn_bf16_amx() == (attn_bf16_attention() && attn__amx_usable()),
             "AMX attention tiles (%d) = bf16 attention tiles with AMX usable", attn_bf16_amx());
}

static void names(void)
{
    for (int l = 0; l < ATTN_ISA_COUNT; l++) {
        attn_isa back = ATTN_ISA_COUNT;
        TK_CHECK(attn_isa_from_name(attn_isa_name((attn_isa)l), &back) == ATTN_OK && back == (attn_isa)l,
                 "%s reads back", attn_isa_name((attn_isa)l));
    }
    attn_isa l = ATTN_ISA_AVX2;
    TK_CHECK(attn_isa_from_name("AVX512", &l) == ATTN_OK && l == ATTN_ISA_AVX512, "names in any case");
    TK_CHECK(attn_isa_from_name("sse2", &l) == ATTN_ERR_ARG && l == ATTN_ISA_AVX512 &&
                 strstr(attn_last_error(), "sse2"),
             "an unknown name is refused and named, the level unchanged");
    TK_CHECK(!strcmp(attn_isa_name((attn_isa)7), "?"), "a value outside attn_isa is named ?");
}

/* The child of set_max, a fresh process: caps at `level`, exit status 0 when the kernels then run
 * at the highest level the CPU supports at or under it. The cap overrides ATTN_CPU_ISA. */
static int set_max_child(const char *level)
{
    attn_isa cap;
    if (attn_isa_from_name(level, &cap) != ATTN_OK) return 1;
    if (!attn_isa_this_arch(cap)) /* refused, and the kernels run at a level of this architecture */
        return attn_cpu_isa_set_max(cap) == ATTN_ERR_ARG && strstr(attn_last_error(), "another architecture") &&
                       attn_isa_this_arch(attn_cpu_isa()) && attn_cpu_isa() <= best_supported()
                   ? 0
                   : 1;
    if (attn_cpu_isa_set_max(cap) != ATTN_OK) return 1;
#ifdef ATTN_TEST_DISPATCH
    return attn_cpu_isa() == attn__isa_highest(supported_levels(), cap) ? 0 : 1;
#else /* one level: a cap changes nothing */
    return attn_cpu_isa() == best_supported() ? 0 : 1;
#endif
}

/* attn_cpu_isa_set_max before the first kernel call caps the level (in a new process: this one
 * has chosen already; in a build of one level it changes nothing), after it is refused; a cap
 * above the CPU's level changes nothing. */
static void set_max(void)
{
    if (getenv("ATTN_TEST_EMULATOR")) { /* qemu-user 7.2: a forked child of this test hangs before its exec */
        printf("test_cpu_isa: attn_cpu_isa_set_max in fresh processes: skipped under %s\n",
               getenv("ATTN_TEST_EMULATOR"));
        return;
    }
    for (int l = 0; l < ATTN_ISA_COUNT; l++) {
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", "test_cpu_isa", "--set-max-child", attn_isa_name((attn_isa)l), (char *)NULL);
            _exit(127);
        }
        int status = 0;
        TK_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                 "attn_cpu_isa_set_max(%s) in a fresh process gives the highest level supported at or under it",
                 attn_isa_name((attn_isa)l));
    }
    (void)attn_cpu_isa();
    attn_clear_error();
    TK_CHECK(attn_cpu_isa_set_max(ATTN_ISA_BASELINE) == ATTN_ERR_STATE && strstr(attn_last_error(), "already"),
             "attn_cpu_isa_set_max after the first kernel call is refused: %s", attn_last_error());
    TK_CHECK(attn_cpu_isa_set_max((attn_isa)9) == ATTN_ERR_ARG, "a level outside attn_isa is refused");
}

/* Every supported level's tile GEMM and softmax against the references (float64 sums), and the
 * same bits from one level twice. With |a|, |b| <= 1, a float32 sum of K products is within
 * K u sum|a b| <= K^2 u of the exact one (u = 2^-24), times alpha; the reference rounds once. */
static void every_level(void)
{
    enum {
        M = 13,
        N = 37,
        K = 29
    };
    float a[M * K], b[K * N], c[M * N], c2[M * N], ref[M * N];
    attn_rng rng;
    attn_rng_seed(&rng, 11);
    for (int i = 0; i < M * K; i++) a[i] = attn_rng_uniform(&rng) * 2.0f - 1.0f;
    for (int i = 0; i < K * N; i++) b[i] = attn_rng_uniform(&rng) * 2.0f - 1.0f;
    for (int l = 0; l < ATTN_ISA_COUNT; l++) {
        const attn__kernel_table *k = attn__kernels_at((attn_isa)l);
        if (!k) continue;
        k->attn__tile_gemm_ref(ref, N, a, K, 1, b, N, M, N, K, 0.5f, false);
        k->attn__tile_gemm(c, N, a, K, 1, b, N, M, N, K, 0.5f, false);
        k->attn__tile_gemm(c2, N, a, K, 1, b, N, M, N, K, 0.5f, false);
        char what[64];
        snprintf(what, sizeof what, "tile GEMM at %s", attn_isa_name((attn_isa)l));
        tk_close(what, c, ref, M * N, 0.5f * K * K * 0x1p-24f + 0x1p-24f * 8, 0.0f);
        TK_CHECK(!memcmp(c, c2, sizeof c), "%s: the same bits twice", what);
        float y[M * N], y_ref[M * N];
        k->attn__softmax_rows(y, c, M, N, 1);
        k->attn__softmax_rows_ref(y_ref, c, M, N);
        snprintf(what, sizeof what, "softmax at %s", attn_isa_name((attn_isa)l));
        tk_close(what, y, y_ref, M * N, 1e-6f, 1e-5f);
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--set-max-child")) return set_max_child(argv[2]);
    decoding();
    decoding_hwcap();
    this_host();
    names();
    set_max();
    every_level();
    return tk_finish("test_cpu_isa");
}

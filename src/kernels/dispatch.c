/* The level of the kernels (attn_cpu_isa, dispatch_internal.h): the levels this build has and this CPU
 * and its OS support (x86: cpuid and XCR0; aarch64: the auxiliary vector's HWCAP and HWCAP2), read
 * once, the highest of them at or under the cap of ATTN_CPU_ISA or attn_cpu_isa_set_max; and the
 * plain-named kernels, each a call through the chosen level's table. Compiled once, at the
 * baseline. */
#include "dispatch_internal.h"
#include "levels_internal.h"

#include "../core/core_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__linux__) && defined(__aarch64__)
#include <sys/auxv.h>
#endif

/* ---- the levels (levels_internal.h) ---- */

enum level_arch {
    ARCH_any,
    ARCH_x86_64,
    ARCH_aarch64,
    ARCH_other
};
#if defined(__x86_64__)
#define THIS_ARCH ARCH_x86_64
#elif defined(__aarch64__)
#define THIS_ARCH ARCH_aarch64
#else
#define THIS_ARCH ARCH_other
#endif

static const struct level {
    const char *name;
    enum level_arch arch;
} levels[ATTN_ISA_COUNT] = {
#define LEVEL_ROW(constant, name, arch, options) [constant] = {#name, ARCH_##arch},
    ATTN_LEVELS(LEVEL_ROW)
#undef LEVEL_ROW
};
#define LEVEL_COUNT(constant, name, arch, options) +1
_Static_assert(0 ATTN_LEVELS(LEVEL_COUNT) == ATTN_ISA_COUNT, "levels_internal.h lists every attn_isa, once");
#undef LEVEL_COUNT

const char *attn_isa_name(attn_isa level)
{
    return (unsigned)level < ATTN_ISA_COUNT ? levels[level].name : "?";
}

bool attn_isa_this_arch(attn_isa level)
{
    return (unsigned)level < ATTN_ISA_COUNT && (levels[level].arch == ARCH_any || levels[level].arch == THIS_ARCH);
}

static bool parse_level(const char *name, attn_isa *level)
{
    for (int i = 0; i < ATTN_ISA_COUNT; i++)
        if (!strcasecmp(name, levels[i].name)) {
            *level = (attn_isa)i;
            return true;
        }
    return false;
}

attn_status attn_isa_from_name(const char *name, attn_isa *level)
{
    if (!name || !level) return attn__fail(ATTN_ERR_ARG, "attn_isa_from_name: name or level is NULL");
    if (parse_level(name, level)) return ATTN_OK;
    char known[128] = "";
    for (int i = 0; i < ATTN_ISA_COUNT; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", levels[i].name);
    return attn__fail(ATTN_ERR_ARG, "attn_isa_from_name: \"%s\" is not a level (%s)", name, known);
}

/* ---- what the CPU supports ---- */

/* x86: the highest level whose every instruction the CPU has and the OS saves the registers of. A pure
 * function of the cpuid words, so that a test can feed it other CPUs' words. The levels' compiler
 * flags (-march=x86-64-v3, -v4) allow every feature of the psABI level, so each is checked. */
attn_isa attn__isa_from_cpuid(const attn__cpuid_words *w)
{
    const uint32_t ecx1 = w->leaf1_ecx, ebx7 = w->leaf7_ebx;
    const bool os_avx = (ecx1 >> 27 & 1) && (w->xcr0 & 0x6) == 0x6; /* OSXSAVE; XMM, YMM state */
    const bool os_avx512 = os_avx && (w->xcr0 & 0xe6) == 0xe6;      /* + opmask, ZMM state */
    const bool v3 = os_avx && (ecx1 >> 28 & 1) /* AVX */ && (ecx1 >> 12 & 1) /* FMA */ && (ecx1 >> 29 & 1) /* F16C */ &&
                    (ecx1 >> 22 & 1) /* MOVBE */ && (ebx7 >> 5 & 1) /* AVX2 */ && (ebx7 >> 3 & 1) /* BMI1 */ &&
                    (ebx7 >> 8 & 1) /* BMI2 */ && (w->ext1_ecx >> 5 & 1) /* LZCNT */;
    const bool v4 = v3 && os_avx512 && (ebx7 >> 16 & 1) /* F */ && (ebx7 >> 17 & 1) /* DQ */ &&
                    (ebx7 >> 28 & 1) /* CD */ && (ebx7 >> 30 & 1) /* BW */ && (ebx7 >> 31 & 1) /* VL */;
    const bool bf16 = v4 && (w->leaf7_1_eax >> 5 & 1);
    return bf16 ? ATTN_ISA_AVX512_BF16 : v4 ? ATTN_ISA_AVX512 : v3 ? ATTN_ISA_AVX2 : ATTN_ISA_BASELINE;
}

/* AMD's cores with AVX512_BF16 (Zen 4, Zen 5) run VDPBF16PS at twice the multiply-adds of float32
 * FMAs per cycle (issue 30: 206-225 against 102-113 GFLOP/s on a Zen 4 core). Intel's do not: on a
 * Xeon with AMX, `attn bench peak --threads 1` gives 105 GFLOP/s at avx512_bf16 against 221 for
 * AVX-512 FMAs, and the fused attention at MEDIUM ran 0.69-0.76x HIGHEST; their fast bf16 path is
 * AMX, which oneDNN takes for the linear layers' bf16 GEMMs. A fixed rule rather than a timing at
 * start-up, so that a run's arithmetic never depends on the machine's load. */
bool attn__bf16_dot_fast_from_cpuid(const attn__cpuid_words *w)
{
    return !strcmp(w->vendor, "AuthenticAMD");
}

static bool bf16_dot_fast; /* attn__bf16_dot_fast_from_cpuid of this CPU; written once, by detect */

bool attn__amx_from_cpuid(const attn__cpuid_words *w)
{
    return (w->leaf7_edx >> 24 & 1) /* AMX-TILE */ && (w->leaf7_edx >> 22 & 1) /* AMX-BF16 */ &&
           (w->xcr0 >> 17 & 3) == 3; /* XTILECFG, XTILEDATA */
}

static bool amx_usable; /* attn__amx_usable; written once, by detect */

#if defined(__x86_64__) || defined(__i386__)
/* Linux keeps AMX's 8 KiB of tile data from a process until it asks (arch_prctl); elsewhere none
 * is granted here. */
static bool amx_permitted(void)
{
#if defined(__linux__) && defined(__x86_64__)
    enum {
        ARCH_REQ_XCOMP_PERM = 0x1023,
        XFEATURE_XTILEDATA = 18
    };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return false;
#endif
}

static attn__cpuid_words cpu_words(void)
{
    attn__cpuid_words w = {0};
    unsigned a, b, c, d;
    const unsigned max_leaf = __get_cpuid_max(0, NULL);
    if (__get_cpuid(0, &a, &b, &c, &d)) { /* the vendor: ebx, edx, ecx */
        memcpy(w.vendor, &b, 4), memcpy(w.vendor + 4, &d, 4), memcpy(w.vendor + 8, &c, 4);
    }
    if (max_leaf >= 1 && __get_cpuid(1, &a, &b, &c, &d)) w.leaf1_ecx = c;
    if (max_leaf >= 7 && __get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        w.leaf7_ebx = b;
        w.leaf7_edx = d;
        if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) w.leaf7_1_eax = a;
    }
    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000001u && __get_cpuid(0x80000001u, &a, &b, &c, &d))
        w.ext1_ecx = c;
    if (w.leaf1_ecx >> 27 & 1) { /* OSXSAVE: xgetbv may run */
        uint32_t lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        w.xcr0 = (uint64_t)hi << 32 | lo;
    }
    return w;
}
#endif

/* aarch64: the levels the HWCAP and HWCAP2 words allow, one bit each (Linux's bits: HWCAP's ASIMD 1
 * and SVE 22, HWCAP2's BF16 14; the kernel sets SVE only where it saves the SVE state). A CPU can
 * have either of sve and neon_bf16 without the other (A64FX; Apple's M2). A pure function, as
 * attn__isa_from_cpuid. */
unsigned attn__isa_levels_from_hwcap(uint64_t hwcap, uint64_t hwcap2)
{
    const bool asimd = hwcap >> 1 & 1, sve = hwcap >> 22 & 1, bf16 = hwcap2 >> 14 & 1;
    return 1u << ATTN_ISA_BASELINE | (unsigned)asimd << ATTN_ISA_NEON | (unsigned)(asimd && sve) << ATTN_ISA_SVE |
           (unsigned)(asimd && bf16) << ATTN_ISA_NEON_BF16;
}

attn_isa attn__isa_highest(unsigned levels, int max)
{
    for (int l = max < ATTN_ISA_COUNT - 1 ? max : ATTN_ISA_COUNT - 1; l > 0; l--)
        if (levels >> l & 1) return (attn_isa)l;
    return ATTN_ISA_BASELINE;
}

/* ---- the tables this build has ---- */

#ifdef ATTN_DISPATCH
#include "levels_built.h" /* ATTN_LEVELS_BUILT, generated by CMakeLists.txt */
#define LEVEL_TABLE_DECLARATION(name) extern const attn__kernel_table attn__kernels_##name;
ATTN_LEVELS_BUILT(LEVEL_TABLE_DECLARATION)
#undef LEVEL_TABLE_DECLARATION
enum {
#define LEVEL_CONSTANT(constant, name, arch, options) LEVEL_##name = constant,
    ATTN_LEVELS(LEVEL_CONSTANT)
#undef LEVEL_CONSTANT
};
/* NULL: not built (another architecture's level, or options the compiler refused) */
static const attn__kernel_table *const tables[ATTN_ISA_COUNT] = {
#define LEVEL_TABLE(name) [LEVEL_##name] = &attn__kernels_##name,
    ATTN_LEVELS_BUILT(LEVEL_TABLE)
#undef LEVEL_TABLE
};

/* The levels built that this CPU supports, one bit each */
static unsigned levels_supported(void)
{
#if defined(__x86_64__)
    const attn__cpuid_words w = cpu_words();
    unsigned cpu = (2u << attn__isa_from_cpuid(&w)) - 1; /* x86's levels: each has those under it */
    bf16_dot_fast = attn__bf16_dot_fast_from_cpuid(&w);
    amx_usable = attn__amx_from_cpuid(&w) && amx_permitted();
#elif defined(__aarch64__) && defined(__linux__)
    unsigned cpu = attn__isa_levels_from_hwcap(getauxval(AT_HWCAP), getauxval(AT_HWCAP2));
#else
    unsigned cpu = 1u << ATTN_ISA_BASELINE;
#endif
    unsigned built = 0;
    for (int l = 0; l < ATTN_ISA_COUNT; l++) built |= (unsigned)(tables[l] != NULL) << l;
    return cpu & built; /* the baseline is always built */
}
#else
/* One level, the compiler flags' (ATTN_NATIVE, or another architecture): the plain names. */
#define ATTN_KERNEL_ENTRY(ret, name, params, args) .name = name,
static const attn__kernel_table build_table = {ATTN_KERNELS(ATTN_KERNEL_ENTRY)};
#undef ATTN_KERNEL_ENTRY

/* the level the compiler flags give */
static attn_isa build_level(void)
{
#if defined(__aarch64__) && defined(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC)
    return ATTN_ISA_NEON_BF16;
#elif defined(__aarch64__) && defined(__ARM_FEATURE_SVE)
    return ATTN_ISA_SVE;
#elif defined(__aarch64__)
    return ATTN_ISA_NEON;
#elif defined(__AVX512F__) && defined(__AVX512BF16__)
    return ATTN_ISA_AVX512_BF16;
#elif defined(__AVX512F__)
    return ATTN_ISA_AVX512;
#elif defined(__AVX2__) && defined(__FMA__)
    return ATTN_ISA_AVX2;
#else
    return ATTN_ISA_BASELINE;
#endif
}

static unsigned levels_supported(void)
{
#if defined(__x86_64__) || defined(__i386__)
    const attn__cpuid_words w = cpu_words();
    bf16_dot_fast = attn__bf16_dot_fast_from_cpuid(&w);
    amx_usable = attn__amx_from_cpuid(&w) && amx_permitted();
#endif
    return 1u << build_level();
}
#endif

/* ---- the choice, once ---- */

static pthread_once_t detect_once = PTHREAD_ONCE_INIT, choice_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t choice_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned supported;     /* the levels built and supported, one bit each; written once, by detect */
static attn_isa best;          /* the highest of them */
static bool chosen;            /* under choice_lock */
static int requested_max = -1; /* attn_cpu_isa_set_max's cap, -1: none; under choice_lock */
static attn_isa level;         /* the choice; written once, by choose */
static const attn__kernel_table *table;

static void detect(void)
{
    supported = levels_supported();
    best = attn__isa_highest(supported, ATTN_ISA_COUNT - 1);
}

static void choose(void)
{
    pthread_once(&detect_once, detect);
    pthread_mutex_lock(&choice_lock);
    attn_isa cap;
    const char *env = getenv("ATTN_CPU_ISA");
    if (requested_max >= 0)
        level = attn__isa_highest(supported, requested_max);
    else if (env && parse_level(env, &cap) && attn_isa_this_arch(cap))
        level = attn__isa_highest(supported, cap);
    else
        level = best;
#ifdef ATTN_DISPATCH
    table = tables[level];
#else
    level = best; /* one level: a cap changes nothing */
    table = &build_table;
#endif
    chosen = true;
    pthread_mutex_unlock(&choice_lock);
}

attn_isa attn_cpu_isa(void)
{
    pthread_once(&choice_once, choose);
    return level;
}

const attn__kernel_table *attn__kernels(void)
{
    pthread_once(&choice_once, choose);
    return table;
}

bool attn_cpu_isa_supported(attn_isa l)
{
    pthread_once(&detect_once, detect);
    return (unsigned)l < ATTN_ISA_COUNT && (supported >> l & 1);
}

const attn__kernel_table *attn__kernels_at(attn_isa l)
{
    if (!attn_cpu_isa_supported(l)) return NULL;
#ifdef ATTN_DISPATCH
    return tables[l];
#else
    return &build_table;
#endif
}

bool attn_bf16_products(void)
{
    return attn_cpu_isa() == ATTN_ISA_AVX512_BF16 || attn_cpu_isa() == ATTN_ISA_NEON_BF16;
}

bool attn__amx_usable(void)
{
    pthread_once(&detect_once, detect);
    return amx_usable;
}

/* On aarch64 BFDOT does two multiply-adds per lane and instruction where FMLA does one: the rule is
 * that count, since no ARM host has timed it here (docs/results.md). */
bool attn_bf16_attention(void)
{
    pthread_once(&detect_once, detect);
    return attn_bf16_products() && (attn_cpu_isa() == ATTN_ISA_NEON_BF16 || bf16_dot_fast || amx_usable);
}

bool attn_bf16_amx(void)
{
    return attn_bf16_attention() && attn__amx_usable();
}

sdpa_sums attn__bf16_sums(void)
{
    return attn_bf16_amx() ? SDPA_SUMS_AMX : attn_cpu_isa() == ATTN_ISA_NEON_BF16 ? SDPA_SUMS_BFDOT : SDPA_SUMS_DPBF16;
}

attn_status attn_cpu_isa_set_max(attn_isa max)
{
    if ((unsigned)max >= ATTN_ISA_COUNT)
        return attn__fail(ATTN_ERR_ARG, "attn_cpu_isa_set_max: level %d is not an attn_isa", (int)max);
    if (!attn_isa_this_arch(max))
        return attn__fail(ATTN_ERR_ARG, "attn_cpu_isa_set_max: %s is a level of another architecture",
                          attn_isa_name(max));
    pthread_mutex_lock(&choice_lock);
    const bool late = chosen;
    if (!late) requested_max = (int)max;
    pthread_mutex_unlock(&choice_lock);
    if (late)
        return attn__fail(
            ATTN_ERR_STATE,
            "attn_cpu_isa_set_max: the kernels already run at %s (set the cap before the first kernel call)",
            attn_isa_name(level));
    return ATTN_OK;
}

/* ---- the plain names: each a call through the chosen table ---- */

#ifdef ATTN_DISPATCH
#define ATTN_RETURN_void
#define ATTN_RETURN_float return
#define ATTN_RETURN_int64_t return
#define ATTN_KERNEL_CALL(ret, name, params, args)                                                                      \
    ret name params                                                                                                    \
    {                                                                                                                  \
        ATTN_RETURN_##ret attn__kernels()->name args;                                                                  \
    }
ATTN_KERNELS(ATTN_KERNEL_CALL)
#undef ATTN_KERNEL_CALL
#endif

/* The level of the kernels (attn_cpu_isa, dispatch_internal.h): what this CPU and its OS support, read
 * once from cpuid and XCR0, capped by ATTN_CPU_ISA or attn_cpu_isa_set_max; and the plain-named
 * kernels, each a call through the chosen level's table. Compiled once, at the baseline. */
#include "dispatch_internal.h"

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

static const char *const isa_names[ATTN_ISA_COUNT] = {"baseline", "avx2", "avx512", "avx512_bf16"};

const char *attn_isa_name(attn_isa level)
{
    return (unsigned)level < ATTN_ISA_COUNT ? isa_names[level] : "?";
}

static bool parse_level(const char *name, attn_isa *level)
{
    for (int i = 0; i < ATTN_ISA_COUNT; i++)
        if (!strcasecmp(name, isa_names[i])) {
            *level = (attn_isa)i;
            return true;
        }
    return false;
}

attn_status attn_isa_from_name(const char *name, attn_isa *level)
{
    if (!name || !level) return attn__fail(ATTN_ERR_ARG, "attn_isa_from_name: name or level is NULL");
    if (parse_level(name, level)) return ATTN_OK;
    return attn__fail(ATTN_ERR_ARG, "attn_isa_from_name: \"%s\" is not baseline, avx2, avx512 or avx512_bf16", name);
}

/* ---- what the CPU supports ---- */

/* The highest level whose every instruction the CPU has and the OS saves the registers of. A pure
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

#if defined(__x86_64__) || defined(__i386__)
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
    if (__get_cpuid_max(0x80000000u, NULL) >= 0x80000001u && __get_cpuid(0x80000001u, &a, &b, &c, &d)) w.ext1_ecx = c;
    if (w.leaf1_ecx >> 27 & 1) { /* OSXSAVE: xgetbv may run */
        uint32_t lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        w.xcr0 = (uint64_t)hi << 32 | lo;
    }
    return w;
}
#endif

/* ---- the tables this build has ---- */

#ifdef ATTN_DISPATCH
extern const attn__kernel_table attn__kernels_baseline, attn__kernels_avx2, attn__kernels_avx512;
#ifdef ATTN_DISPATCH_BF16
extern const attn__kernel_table attn__kernels_avx512_bf16;
#define BF16_TABLE (&attn__kernels_avx512_bf16)
#else
#define BF16_TABLE NULL /* a compiler without -mavx512bf16: the level is not built */
#endif
static const attn__kernel_table *const tables[ATTN_ISA_COUNT] = {&attn__kernels_baseline, &attn__kernels_avx2,
                                                                 &attn__kernels_avx512, BF16_TABLE};

static attn_isa best_level(void)
{
    const attn__cpuid_words w = cpu_words();
    attn_isa level = attn__isa_from_cpuid(&w);
    while (!tables[level]) level--; /* the baseline is always built */
    bf16_dot_fast = attn__bf16_dot_fast_from_cpuid(&w);
    amx_usable = attn__amx_from_cpuid(&w) && amx_permitted();
    return level;
}
#else
/* One level, the compiler flags' (ATTN_NATIVE, or another architecture): the plain names. */
#define ATTN_KERNEL_ENTRY(ret, name, params, args) .name = name,
static const attn__kernel_table build_table = {ATTN_KERNELS(ATTN_KERNEL_ENTRY)};
#undef ATTN_KERNEL_ENTRY

static attn_isa best_level(void)
{
#if defined(__x86_64__) || defined(__i386__)
    const attn__cpuid_words w = cpu_words();
    bf16_dot_fast = attn__bf16_dot_fast_from_cpuid(&w);
    amx_usable = attn__amx_from_cpuid(&w) && amx_permitted();
#endif
#if defined(__AVX512F__) && defined(__AVX512BF16__)
    return ATTN_ISA_AVX512_BF16;
#elif defined(__AVX512F__)
    return ATTN_ISA_AVX512;
#elif defined(__AVX2__) && defined(__FMA__)
    return ATTN_ISA_AVX2;
#else
    return ATTN_ISA_BASELINE;
#endif
}
#endif

/* ---- the choice, once ---- */

static pthread_once_t detect_once = PTHREAD_ONCE_INIT, choice_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t choice_lock = PTHREAD_MUTEX_INITIALIZER;
static attn_isa best;          /* the best level built and supported; written once, by detect */
static bool chosen;            /* under choice_lock */
static int requested_max = -1; /* attn_cpu_isa_set_max's cap, -1: none; under choice_lock */
static attn_isa level;         /* the choice; written once, by choose */
static const attn__kernel_table *table;

static void detect(void)
{
    best = best_level();
}

static void choose(void)
{
    pthread_once(&detect_once, detect);
    pthread_mutex_lock(&choice_lock);
    level = best;
    attn_isa cap;
    const char *env = getenv("ATTN_CPU_ISA");
    if (requested_max >= 0)
        level = (attn_isa)requested_max < level ? (attn_isa)requested_max : level;
    else if (env && parse_level(env, &cap))
        level = cap < level ? cap : level;
#ifdef ATTN_DISPATCH
    table = tables[level];
#else
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
    return (unsigned)l < ATTN_ISA_COUNT &&
#ifdef ATTN_DISPATCH
           tables[l] &&
#else
           l == best && /* the build's one level */
#endif
           l <= best;
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
    return attn_cpu_isa() == ATTN_ISA_AVX512_BF16;
}

bool attn__amx_usable(void)
{
    pthread_once(&detect_once, detect);
    return amx_usable;
}

bool attn_bf16_attention(void)
{
    pthread_once(&detect_once, detect);
    return attn_bf16_products() && (bf16_dot_fast || amx_usable);
}

bool attn_bf16_amx(void)
{
    return attn_bf16_attention() && attn__amx_usable();
}

attn_status attn_cpu_isa_set_max(attn_isa max)
{
    if ((unsigned)max >= ATTN_ISA_COUNT)
        return attn__fail(ATTN_ERR_ARG, "attn_cpu_isa_set_max: level %d is not an attn_isa", (int)max);
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

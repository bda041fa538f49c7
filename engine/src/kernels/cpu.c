/*
 * cpu.c - what this processor and its OS run: CPUID and XGETBV, read once.
 *
 * CPUID says what the processor has (leaves 1, 7 and 7.1, read once per
 * process); XGETBV says whether the OS saves the wide registers (an AVX2 CPU
 * under an OS that does not enable YMM state must not run AVX2 code; AVX-512
 * needs the opmask and ZMM states too: XCR0 bits 1, 2, 5, 6, 7). From those
 * this file answers, per kernel table, whether it runs here (kern_cpu_runs)
 * and if not what is missing (kern_cpu_lacks), and gives the feature string
 * for reports (kern_cpu_features, cx_cpu_features). It knows instruction-set
 * names, not tables: dispatch.c composes and hands out the tables.
 *
 * Built without any ISA flags (the Makefile gives them only to files named
 * *_avx2.c, *_avx512.c, ...), so it runs on any x86-64 before anything is
 * known about the CPU.
 */
#include "cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cortex.h"
#include "kernels.h"

#ifdef CX_X86
#include <cpuid.h>
#endif

typedef struct cpu_caps {
    int sse42, avx, avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avxvnni;
    int os_ymm, os_zmm;
} cpu_caps;

static cpu_caps caps;
static char features[200];
static pthread_once_t once = PTHREAD_ONCE_INIT;

#ifdef CX_X86
/* XCR0: which register states the OS saves on a context switch. */
static unsigned long long xgetbv0(void) {
    unsigned int lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

/* Fill caps and the feature string from CPUID leaves 1, 7 and 7.1. */
static void detect(void) {
#ifdef CX_X86
    unsigned int a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        caps.sse42 = (c >> 20) & 1;
        caps.fma = (c >> 12) & 1;
        caps.f16c = (c >> 29) & 1;
        caps.avx = (c >> 28) & 1;
        int osxsave = (c >> 27) & 1;
        if (osxsave) {
            unsigned long long xcr0 = xgetbv0();
            caps.os_ymm = (xcr0 & 0x6) == 0x6;
            caps.os_zmm = (xcr0 & 0xe6) == 0xe6;
        }
    }
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        caps.avx2 = (b >> 5) & 1;
        caps.avx512f = (b >> 16) & 1;
        caps.avx512bw = (b >> 30) & 1;
        caps.avx512vl = (b >> 31) & 1;
        caps.avx512dq = (b >> 17) & 1;
        caps.avx512vnni = (c >> 11) & 1;
        unsigned int max_sub = a;
        if (max_sub >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            caps.avxvnni = (a >> 4) & 1;
            caps.avx512bf16 = (a >> 5) & 1;
        }
    }
#endif
    snprintf(features, sizeof features, "%s%s%s%s%s%s%s%s%s%s%s%s", caps.sse42 ? "sse4.2 " : "",
             caps.avx ? "avx " : "", caps.avx2 ? "avx2 " : "", caps.fma ? "fma " : "", caps.f16c ? "f16c " : "",
             caps.avx512f ? "avx512f " : "", caps.avx512bw ? "avx512bw " : "", caps.avx512vl ? "avx512vl " : "",
             caps.avx512dq ? "avx512dq " : "", caps.avx512vnni ? "avx512vnni " : "",
             caps.avx512bf16 ? "avx512bf16 " : "", caps.avxvnni ? "avxvnni " : "");
    size_t len = strlen(features);
    if (len) features[len - 1] = 0;
    else snprintf(features, sizeof features, "none");
}

/* 1 if the AVX2 table can run here: the instructions and the OS's YMM state. */
static int avx2_usable(void) { return caps.avx2 && caps.fma && caps.f16c && caps.os_ymm; }
/* The avxvnni table: the AVX2 table's features and AVX-VNNI (it shares the OS's YMM state). */
static int avxvnni_usable(void) { return avx2_usable() && caps.avxvnni; }
/* The AVX-512 table: F, BW, VL, DQ, the OS's ZMM and opmask state, and AVX2 (it reuses that table's kernels). */
static int avx512_usable(void) {
    return avx2_usable() && caps.avx512f && caps.avx512bw && caps.avx512vl && caps.avx512dq && caps.os_zmm;
}
static int avx512vnni_usable(void) { return avx512_usable() && caps.avx512vnni; }
/* The avx512bf16 table: the avx512vnni table's features (it reuses that table) and AVX-512 BF16. */
static int avx512bf16_usable(void) { return avx512vnni_usable() && caps.avx512bf16; }

/* See cpu.h. */
int kern_cpu_runs(const char *isa) {
    pthread_once(&once, detect);
    if (!strcmp(isa, "scalar")) return 1;
    if (!strcmp(isa, "avx2")) return avx2_usable();
    if (!strcmp(isa, "avxvnni")) return avxvnni_usable();
    if (!strcmp(isa, "avx512")) return avx512_usable();
    if (!strcmp(isa, "avx512vnni")) return avx512vnni_usable();
    if (!strcmp(isa, "avx512bf16")) return avx512bf16_usable();
    return 0;
}

/* See cpu.h. */
const char *kern_cpu_lacks(const char *isa) {
    pthread_once(&once, detect);
    if (!strcmp(isa, "avx2")) return !caps.avx2 ? "AVX2" : !caps.fma ? "FMA" : !caps.f16c ? "F16C" : "OS YMM state";
    if (!avx2_usable()) return kern_cpu_lacks("avx2");
    if (!strcmp(isa, "avxvnni")) return caps.avxvnni ? "nothing" : "AVX-VNNI";
    if (!caps.avx512f || !caps.avx512bw || !caps.avx512vl || !caps.avx512dq) return "AVX-512 F/BW/VL/DQ";
    if (!caps.os_zmm) return "OS ZMM state (XCR0)";
    if ((!strcmp(isa, "avx512vnni") || !strcmp(isa, "avx512bf16")) && !caps.avx512vnni) return "AVX-512 VNNI";
    if (!strcmp(isa, "avx512bf16") && !caps.avx512bf16) return "AVX-512 BF16";
    return "nothing";
}

const char *kern_cpu_features(void) {
    pthread_once(&once, detect);
    return features;
}

const char *cx_cpu_features(void) { return kern_cpu_features(); }

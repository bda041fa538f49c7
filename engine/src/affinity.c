/*
 * affinity.c - see affinity.h.
 *
 * Both orders start from one sort of the CPUs by (node, package, core, cpu):
 * that is the compact order, SMT siblings adjacent. Walking it gives every
 * CPU three ranks: its domain d (a distinct (node, package) pair), its
 * core's rank r within the domain, its sibling rank s within the core. The
 * spread order sorts by (s, r, d): first siblings of every core before any
 * second sibling, and among those the domains take turns core by core. The
 * three ranks name one CPU, so the order is total and the same on every run.
 */
#include "affinity.h"

#include <assert.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* A small sysfs file's first line into buf (newline dropped); 0, or -1 when unreadable. */
static int read_line(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    buf[strcspn(buf, "\n")] = 0;
    return 0;
}

/* ROOT/cpu/cpuN/topology/NAME as a non-negative integer, else `dflt` (missing,
 * malformed, or -1 as some architectures report an unknown id). */
static int read_topology(const char *root, int cpu, const char *name, int dflt) {
    char path[512], line[64];
    snprintf(path, sizeof path, "%s/cpu/cpu%d/topology/%s", root, cpu, name);
    if (read_line(path, line, sizeof line)) return dflt;
    char *end;
    long v = strtol(line, &end, 10);
    return end != line && *end == 0 && v >= 0 && v < (1L << 30) ? (int)v : dflt;
}

/* See affinity.h. */
int aff_parse_list(const char *s, uint64_t *mask, int max_bits) {
    memset(mask, 0, sizeof(uint64_t) * (size_t)AFF_MASK_WORDS(max_bits));
    const char *p = s;
    while (*p == ' ' || *p == '\t') p++;
    if (!*p || *p == '\n') return 0;
    for (;;) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p || lo < 0) return -1;
        p = end;
        if (*p == '-') {
            hi = strtol(p + 1, &end, 10);
            if (end == p + 1 || hi < lo) return -1;
            p = end;
        }
        if (hi >= max_bits) return -1;
        for (long b = lo; b <= hi; b++) mask[b / 64] |= 1ull << (b % 64);
        if (*p == ',') {
            p++;
            continue;
        }
        return *p == 0 || *p == '\n' ? 0 : -1;
    }
}

/* See affinity.h. */
int aff_format_list(const uint64_t *mask, int max_bits, char *buf, size_t n) {
    assert(n >= 4); /* room for "..." */
    size_t at = 0;
    int count = 0, cut = 0;
    buf[0] = 0;
    for (int b = 0; b < max_bits; b++) {
        if (!(mask[b / 64] >> (b % 64) & 1)) continue;
        int hi = b;
        while (hi + 1 < max_bits && (mask[(hi + 1) / 64] >> ((hi + 1) % 64) & 1)) hi++;
        count += hi - b + 1;
        if (!cut) {
            char item[32];
            if (hi == b) snprintf(item, sizeof item, "%s%d", at ? "," : "", b);
            else snprintf(item, sizeof item, "%s%d-%d", at ? "," : "", b, hi);
            size_t len = strlen(item);
            if (at + len + 4 <= n) { /* keep room for "..." after it */
                memcpy(buf + at, item, len + 1);
                at += len;
            } else {
                snprintf(buf + at, n - at, "...");
                cut = 1;
            }
        }
        b = hi;
    }
    return count;
}

/* See affinity.h. */
int aff_read(const char *root, const cpu_set_t *allowed, aff_topo *t, cx_err *err) {
    t->n = 0;
    for (int c = 0; c < AFF_MAX_CPUS; c++) {
        if (!CPU_ISSET(c, allowed)) continue;
        aff_cpu *a = &t->cpu[t->n++];
        a->cpu = c;
        a->node = 0;
        a->package = read_topology(root, c, "physical_package_id", 0);
        a->core = read_topology(root, c, "core_id", c);
    }
    if (t->n == 0) return cx_fail(err, CX_EINVAL, "placement: this process may run on no CPU (its affinity mask is empty)");
    /* Nodes: each ROOT/node/nodeK/cpulist names its CPUs (a CPU in no list stays on node 0). */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/node", root);
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    uint64_t cpus[AFF_MASK_WORDS(AFF_MAX_CPUS)];
    while ((e = readdir(d)) != NULL) {
        char *end;
        if (strncmp(e->d_name, "node", 4) || !e->d_name[4]) continue;
        long node = strtol(e->d_name + 4, &end, 10);
        if (*end || node < 0 || node >= AFF_MAX_NODES) continue;
        char path[1024], line[4096];
        snprintf(path, sizeof path, "%s/%s/cpulist", dir, e->d_name);
        if (read_line(path, line, sizeof line) || aff_parse_list(line, cpus, AFF_MAX_CPUS)) continue;
        for (int i = 0; i < t->n; i++)
            if (cpus[t->cpu[i].cpu / 64] >> (t->cpu[i].cpu % 64) & 1) t->cpu[i].node = (int)node;
    }
    closedir(d);
    return 0;
}

/* A CPU's sort key: k[0..3] compared in turn. */
typedef struct aff_key {
    int k[4];
    int cpu;
} aff_key;

static int key_cmp(const void *a, const void *b) {
    const aff_key *x = a, *y = b;
    for (int i = 0; i < 4; i++)
        if (x->k[i] != y->k[i]) return x->k[i] < y->k[i] ? -1 : 1;
    return 0;
}

/* See affinity.h. */
int aff_order(const aff_topo *t, int policy, int *order, cx_err *err) {
    assert(policy == CX_PIN_COMPACT || policy == CX_PIN_SPREAD);
    assert(t->n >= 1 && t->n <= AFF_MAX_CPUS);
    const int n = t->n;
    aff_key *keys = malloc(2 * sizeof *keys * (size_t)n), *orig = keys + n; /* 40 KiB at most: not on the stack */
    if (!keys) return cx_fail(err, CX_ENOMEM, "placement: out of memory ordering %d CPUs", n);
    for (int i = 0; i < n; i++) {
        const aff_cpu *c = &t->cpu[i];
        keys[i] = (aff_key){{c->node, c->package, c->core, c->cpu}, c->cpu};
    }
    qsort(keys, (size_t)n, sizeof *keys, key_cmp); /* the compact order */
    if (policy == CX_PIN_SPREAD) {
        memcpy(orig, keys, sizeof *keys * (size_t)n);
        int d = 0, r = 0, s = 0;
        for (int i = 1; i <= n; i++) { /* the ranks of CPU i - 1 of the compact order */
            const int *o = orig[i - 1].k, *q = i > 1 ? orig[i - 2].k : NULL;
            if (q && (o[0] != q[0] || o[1] != q[1])) d++, r = 0, s = 0; /* another (node, package) domain */
            else if (q && o[2] != q[2]) r++, s = 0;                    /* another core of the domain */
            else if (q) s++;                                           /* an SMT sibling of the same core */
            keys[i - 1] = (aff_key){{s, r, d, orig[i - 1].cpu}, orig[i - 1].cpu};
        }
        qsort(keys, (size_t)n, sizeof *keys, key_cmp);
    }
    for (int i = 0; i < n; i++) order[i] = keys[i].cpu;
    free(keys);
    return 0;
}

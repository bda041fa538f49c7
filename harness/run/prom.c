/*
 * prom.c - Prometheus text reading and the difference of two scrapes (see
 * prom.h).
 */
#include "prom.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Length of the series at the start of l[0, n) (a name, then an optional
 * {...} whose quoted values may hold anything escaped); 0 if there is none. */
static size_t series_len(const char *l, size_t n) {
    size_t i = 0;
    while (i < n && l[i] != '{' && l[i] != ' ' && l[i] != '\t') i++;
    if (i == 0) return 0;
    if (i < n && l[i] == '{') {
        int quoted = 0;
        for (i++; i < n; i++) {
            if (quoted && l[i] == '\\') i++;
            else if (l[i] == '"') quoted = !quoted;
            else if (!quoted && l[i] == '}') return i + 1;
        }
        return 0; /* unterminated labels */
    }
    return i;
}

/* Order of series by name, for sorting and lookups. */
static int by_name(const void *a, const void *b) {
    return strcmp(((const prom_series *)a)->name, ((const prom_series *)b)->name);
}

/* Parse the value after the series: a number, NaN or +/-Inf; 0 and *v, or -1. */
static int value_of(const char *p, size_t n, double *v) {
    char buf[64];
    size_t k = 0;
    while (k < n && p[k] != ' ' && p[k] != '\t') k++;
    if (!k || k >= sizeof buf) return -1;
    memcpy(buf, p, k);
    buf[k] = 0;
    char *end;
    *v = strtod(buf, &end);
    return *end ? -1 : 0;
}

/* See prom.h. */
int prom_parse(const char *text, size_t n, prom_scrape *out) {
    memset(out, 0, sizeof *out);
    int cap = 0;
    for (size_t at = 0; at < n;) {
        const char *l = text + at, *nl = memchr(l, '\n', n - at);
        size_t len = nl ? (size_t)(nl - l) : n - at;
        at += len + 1;
        while (len && (l[0] == ' ' || l[0] == '\t')) l++, len--;
        if (len && l[len - 1] == '\r') len--;
        if (!len || l[0] == '#') continue;
        size_t sl = series_len(l, len);
        if (!sl || sl >= PROM_MAX_NAME || memchr(l, 0, sl)) continue;
        size_t v = sl;
        while (v < len && (l[v] == ' ' || l[v] == '\t')) v++;
        double val;
        if (v == sl || value_of(l + v, len - v, &val) || out->n >= PROM_MAX_SERIES) continue;
        if (out->n == cap) {
            int nc = cap ? 2 * cap : 64;
            prom_series *s = realloc(out->s, sizeof *s * (size_t)nc);
            if (!s) return prom_free(out), -1;
            out->s = s;
            cap = nc;
        }
        char *name = malloc(sl + 1);
        if (!name) return prom_free(out), -1;
        memcpy(name, l, sl);
        name[sl] = 0;
        out->s[out->n].name = name;
        out->s[out->n++].value = val;
    }
    if (out->n) qsort(out->s, (size_t)out->n, sizeof *out->s, by_name);
    int w = 0; /* keep the first of duplicates (qsort is not stable: the first by name then) */
    for (int i = 0; i < out->n; i++) {
        if (w && !strcmp(out->s[w - 1].name, out->s[i].name)) { free(out->s[i].name); continue; }
        out->s[w++] = out->s[i];
    }
    out->n = w;
    return 0;
}

/* See prom.h. */
void prom_free(prom_scrape *p) {
    for (int i = 0; i < p->n; i++) free(p->s[i].name);
    free(p->s);
    memset(p, 0, sizeof *p);
}

/* 1 if a and b are the same value (NaN equal to NaN: a gauge that stays NaN did not change). */
static int same(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* See prom.h. Both lists are sorted: one merge pass. */
int prom_diff(const prom_scrape *before, const prom_scrape *after, prom_delta **out, int *n_out) {
    *out = NULL;
    *n_out = 0;
    prom_delta *d = after->n ? malloc(sizeof *d * (size_t)after->n) : NULL;
    if (after->n && !d) return -1;
    int k = 0, j = 0;
    for (int i = 0; i < after->n; i++) {
        const prom_series *a = &after->s[i];
        while (j < before->n && strcmp(before->s[j].name, a->name) < 0) j++;
        int have = j < before->n && !strcmp(before->s[j].name, a->name);
        double b = have ? before->s[j].value : NAN;
        if (have && same(b, a->value)) continue;
        if (!(d[k].name = strdup(a->name))) return prom_delta_free(d, k), -1;
        d[k].before = b;
        d[k].after = a->value;
        d[k++].delta = have ? a->value - b : a->value; /* new: a counter created during the repetition, from 0 */
    }
    if (!k) free(d), d = NULL;
    *out = d;
    *n_out = k;
    return 0;
}

/* See prom.h. */
void prom_delta_free(prom_delta *d, int n) {
    for (int i = 0; d && i < n; i++) free(d[i].name);
    free(d);
}

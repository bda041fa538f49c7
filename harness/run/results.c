/*
 * results.c - small helpers over the in-memory results (see results.h).
 */
#include "results.h"

#include "prom.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rep_set_metric(rep_result *r, const char *name, double value) {
    for (int i = 0; i < r->n_m; i++)
        if (!strcmp(r->m[i].name, name)) {
            r->m[i].value = value;
            return;
        }
    assert(r->n_m < CB_MAX_METRICS);
    if (r->n_m >= CB_MAX_METRICS) return;
    snprintf(r->m[r->n_m].name, sizeof r->m[0].name, "%s", name);
    r->m[r->n_m++].value = value;
}

double rep_get_metric(const rep_result *r, const char *name) {
    for (int i = 0; i < r->n_m; i++)
        if (!strcmp(r->m[i].name, name)) return r->m[i].value;
    return NAN;
}

void rep_add_build(char *list, size_t cap, const char *build) {
    size_t n = strlen(build), k = strlen(list);
    if (!n || !cap) return;
    for (const char *p = list; *p;) { /* already listed? */
        const char *e = strstr(p, ", ");
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !memcmp(p, build, n)) return;
        if (len == 3 && !memcmp(p, "...", 3)) return; /* full: more were left out already */
        p = e ? e + 2 : p + len;
    }
    if (k + (k ? 2 : 0) + n < cap) snprintf(list + k, cap - k, "%s%s", k ? ", " : "", build);
    else if (k && k + 5 < cap) snprintf(list + k, cap - k, ", ...");
}

void rep_free(rep_result *r) {
    for (int i = 0; i < r->n_req; i++) free(r->req[i].itl_ms);
    free(r->req);
    prom_delta_free(r->srv, r->n_srv);
    r->req = NULL;
    r->n_req = 0;
    r->srv = NULL;
    r->n_srv = 0;
}

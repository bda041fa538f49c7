/*
 * prom.h - the Prometheus text exposition format (a server's /metrics), read
 * into series and compared before and after a repetition.
 *
 *   # HELP vllm:num_requests_running ...
 *   vllm:prompt_tokens_total{model_name="m"} 1234
 *   http_requests_total{code="200",path="/v1/completions"} 17 1700000000000
 *
 * A series is the metric name with its label set, as written ("name" or
 * "name{...}"; quoted label values may hold spaces, braces and escapes); its
 * value is the number after it (NaN, +Inf, -Inf included); a timestamp after
 * the value is ignored. Comments, blank lines and lines that do not parse
 * are skipped: a scrape is evidence, not input to validate.
 */
#ifndef CB_PROM_H
#define CB_PROM_H

#include <stddef.h>

#define PROM_MAX_SERIES 100000
#define PROM_MAX_NAME 512 /* bytes of a series (name and labels); longer lines are skipped */

typedef struct prom_series {
    char *name;   /* the series as written, malloc'd */
    double value;
} prom_series;

typedef struct prom_scrape {
    prom_series *s; /* sorted by name, names unique (the first of duplicates kept) */
    int n;
} prom_scrape;

/* One change between two scrapes (srv_metric rows of a repetition). */
typedef struct prom_delta {
    char *name;                  /* malloc'd */
    double before, after, delta; /* before NaN: the series is new (delta = after: counted from 0) */
} prom_delta;

/* Parse text[0, n) into *out (zeroed first). 0, or -1 on no memory. */
int prom_parse(const char *text, size_t n, prom_scrape *out);
void prom_free(prom_scrape *p);

/* The series of `after` whose value differs from `before` (or that `before`
 * lacks), in name order, into a malloc'd array *out of *n_out (NULL and 0
 * when none). 0, or -1 on no memory. */
int prom_diff(const prom_scrape *before, const prom_scrape *after, prom_delta **out, int *n_out);
void prom_delta_free(prom_delta *d, int n);

#endif

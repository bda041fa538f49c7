/*
 * show.h - results tables read back from the database (see show.c).
 */
#ifndef CB_SHOW_H
#define CB_SHOW_H

#include <stdint.h>
#include <stdio.h>

#include "store.h"

struct sqlite3;

/* Summary rows of several runs as md, csv or json; `full` adds every metric. */
int show_table(store *s, const int64_t *ids, int n_ids, const char *fmt, int full, FILE *out, char *err, size_t n);

/* A run's identity, provenance and environment as a markdown bullet list;
 * `show` and `report` both open with it. 0, 1 if no such run, -1 on error. */
int show_run_facts(struct sqlite3 *db, int64_t id, FILE *out);
/* Text on one markdown line: '|' escaped, newlines flattened. */
void show_md_inline(FILE *f, const char *s);

/* The run's KV cache configuration and kv_* metrics (show_kv.c). */
void show_kv(struct sqlite3 *db, int64_t id, FILE *out);

/* Per-adapter latency table of a trace run (nothing for other runs). */
void show_adapters(struct sqlite3 *db, int64_t id, FILE *out);

#endif

/*
 * show.h - results tables read back from the database (see show.c).
 */
#ifndef CB_SHOW_H
#define CB_SHOW_H

#include <stdint.h>
#include <stdio.h>

#include "store.h"

/* Summary rows of several runs as md, csv or json; `full` adds every metric. */
int show_table(store *s, const int64_t *ids, int n_ids, const char *fmt, int full, FILE *out, char *err, size_t n);

/* Per-adapter latency table of a trace run (nothing for other runs). */
struct sqlite3;
void show_adapters(struct sqlite3 *db, int64_t id, FILE *out);

#endif

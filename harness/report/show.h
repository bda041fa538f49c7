/*
 * show.h - runs read back for people and tools (show.c, show_kv.c): `list`,
 * `show`, the tables `run` prints, and the run header `report` shares.
 */
#ifndef CB_SHOW_H
#define CB_SHOW_H

#include <stdint.h>
#include <stdio.h>

#include "store.h"

/* `cortex-bench list`: the newest `limit` runs as a markdown table. */
int show_list(store *s, FILE *out, int limit, char *err, size_t errlen);
/* `cortex-bench show`: one run in md, csv, json, jsonl or bmf; -1 with a message (no such run). */
int show_run(store *s, int64_t run_id, const char *format, FILE *out, char *err, size_t errlen);

/* Summary rows of several runs as md, csv, json, jsonl (json's objects, one a
 * line) or bmf (export_bmf); `full` adds every metric. */
int show_table(store *s, const int64_t *ids, int n_ids, const char *fmt, int full, FILE *out, char *err, size_t errlen);

/* A run's identity, provenance and environment as a markdown bullet list;
 * `show` and `report` both open with it. 0, 1 if no such run, -1 on error. */
int show_run_facts(store *s, int64_t id, FILE *out);
/* The run's verdict (validity.h): "run N: VALID" or "INVALID: reasons", its
 * request outcomes (finished by length / at a stop, truncated, failed,
 * rejected, timed out, cancelled), over HTTP with --server-cache on the
 * prompt tokens the server's cache served, and for a VALID run its request
 * rate, goodput and peak RSS. `run` prints it under its table, `show` at the top.
 * 0, or -1 (no such run). */
int show_verdict(store *s, int64_t id, FILE *out);
/* "VALID", "INVALID" (bold in markdown, red on a terminal) or "complete" (a run
 * before schema v12) into buf; returns buf. */
const char *show_validity_word(char *buf, size_t n, const char *validity, FILE *out);
/* 1 when out is a terminal that takes colour (not NO_COLOR, not TERM=dumb). */
int show_color(FILE *out);
/* v printed with printf format `fmt` (one double) into buf, or "-" when it
 * is NaN or infinite (a figure that was not measured): never "nan". Returns buf. */
const char *show_num(char *buf, size_t n, const char *fmt, double v);
/* Text on one markdown line: '|' escaped, newlines flattened. */
void show_md_inline(FILE *f, const char *s);

/* Per item (prompt / trace entry / test) as a markdown table: its outcome
 * (validity.h), tokens generated of those asked, and means over repetitions;
 * for an INVALID run the outcomes only (no timing: none is a measurement).
 * `show` and `report` print it. */
void show_items(store *s, int64_t id, FILE *out);

/* The run's KV cache configuration and kv_* metrics (show_kv.c). */
void show_kv(store *s, int64_t id, FILE *out);

/* A run over HTTP: the server and its /metrics series that changed
 * (show_server.c); nothing for in-process runs. */
void show_server(store *s, int64_t id, FILE *out);

/* Speculative decoding (show_spec.c): how a --spec run speculated and its
 * spec_* metrics; over HTTP the server's draft counts or that it reported
 * none; nothing for other in-process runs. */
void show_spec(store *s, int64_t id, FILE *out);

/* Per-adapter latency table of a trace run (nothing for other runs). */
void show_adapters(store *s, int64_t id, FILE *out);

#endif

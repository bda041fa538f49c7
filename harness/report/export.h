/*
 * export.h - runs written for other tools (export.c): the output formats
 * `run -o` and `show -o` take, Bencher Metric Format (BMF) JSON of the
 * headline metrics, and every request of a run (`show RUN --requests`).
 * docs/harness.md, "Exports for other tools", describes each format.
 */
#ifndef CB_EXPORT_H
#define CB_EXPORT_H

#include <stdint.h>
#include <stdio.h>

#include "store.h"

/* The summary formats of `run -o` and `show -o`, for messages. */
#define EXPORT_FORMATS "md, csv, json, jsonl, bmf"
/* The formats of `show RUN --requests -o`. */
#define EXPORT_REQUEST_FORMATS "md, csv, json, jsonl"

/* 1 when `fmt` is one of EXPORT_FORMATS. */
int export_format_known(const char *fmt);
/* 1 when `fmt` is one of EXPORT_REQUEST_FORMATS. */
int export_request_format_known(const char *fmt);

/*
 * Bencher Metric Format: one JSON object mapping a benchmark name per run
 * ("MODEL/TYPE/WORKLOAD/tTHREADS", see export.c) to its headline measures,
 * each {"value": median, "lower_value": min, "upper_value": max} over the
 * repetitions. Only measurements (complete and VALID runs) are written; an
 * INVALID or incomplete run gets no entry and one line on stderr saying
 * why. 0, or -1 with a message in err (a database error).
 */
int export_bmf(store *s, const int64_t *ids, int n_ids, FILE *out, char *err, size_t errlen);

/*
 * Every request of every repetition of run `id` in md, csv, json or jsonl,
 * one row each (rep, idx order), with the run's validity on every row. An
 * INVALID run's rows carry their outcomes (state, tokens, error, canary) and
 * no timing: its timings are no measurement. 0, or -1 with a message in err
 * (no such run, an unknown format, a database error).
 */
int export_requests(store *s, int64_t id, const char *fmt, FILE *out, char *err, size_t errlen);

#endif

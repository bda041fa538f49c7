/*
 * store.h - the benchmark database: a SQLite file, or a PostgreSQL server
 * shared by many machines (a postgresql:// URL; db.h carries one SQL over
 * both engines).
 *
 * A versioned schema migrated forward on open (SQLite: WAL journal, foreign
 * keys on). Every run carries a UUID, so copies between stores (store_sync.h:
 * push, pull) never land a run twice. A run is written in two steps: store_begin_run
 * commits the run row as 'incomplete' (so a killed run is visible as such),
 * store_finish_run writes every result and flips it to 'complete' in one
 * transaction (so a run's results land whole or not at all). Schema:
 * docs/harness.md. Typed readers: store_read.h (runs, items, counters, the
 * run-reference resolver) and store_gate.h (gates, verdicts, canaries,
 * histories); the hw table: hw_store.h.
 */
#ifndef CB_STORE_H
#define CB_STORE_H

#include <stdint.h>
#include <stdio.h>

#include "env.h"
#include "results.h"
#include "validity.h"

#define STORE_SCHEMA_VERSION 14

typedef struct store store;

/* The SQL condition under which run `alias` is a measurement: complete and
 * VALID (validity.h). Gates, baselines, trends, sweeps, the challenge's
 * thread-count siblings and commit references take only these. */
#define STORE_MEASUREMENT(alias) "(" alias ".status = 'complete' AND " alias ".validity = 'valid')"

/* Open (creating and migrating as needed) `target`: a file path, or a
 * postgresql:// URL. A file's parent directory must exist, except the
 * default reports/ which callers create. */
int store_open(const char *path, store **out, char *err, size_t errlen);
/* Is `target` a server's URL (postgresql://, postgres://) rather than a file? */
int store_is_url(const char *target);
/* Tests only: open and migrate no further than `version`. */
int store_open_version(const char *path, int version, store **out, char *err, size_t errlen);
void store_close(store *s);
int store_version(store *s);
/* The connection (db.h): for the store's own files and for tests that
 * check the schema; no other harness code speaks SQL. */
struct db *store_db(store *s);
/* The target for messages: the path, or the URL without its password. */
const char *store_name(store *s);

/* The environments row of `e` (inserted when new); its id, or -1. */
int64_t store_env_id(store *s, const env_info *e);

/* Record the run as 'incomplete' under a fresh UUID (its name in every store); its id in *run_id. */
int store_begin_run(store *s, const run_meta *m, const env_info *e, int64_t *run_id, char *err, size_t errlen);
/* Write every result of the run and its verdict (validity.h; load_after: /proc/loadavg at the end, or NULL) and
 * mark it complete, in one transaction. Over HTTP, the builds the answers named (rep_result.server_build)
 * become runs.server_build, replacing what the probe found (store_begin_run wrote run_meta.server_build). */
int store_finish_run(store *s, int64_t run_id, const rep_result *reps, int n_reps, const run_verdict *v,
                     const char *load_after, char *err, size_t errlen);
/* Mark a run failed with a reason (best effort, own transaction). */
int store_fail_run(store *s, int64_t run_id, const char *reason);

/* Tag run `id`, a measurement (STORE_MEASUREMENT), as `name`; 0, or -1 when
 * there is no such run. Several runs may carry a tag (one per configuration:
 * see store_move_tag). */
int store_tag_run(store *s, int64_t id, const char *name);
/* Move tag `name` to run `id` (a measurement) within its configuration: the
 * tag leaves the other runs with the same compare_key and workload (the
 * previous one of them into *previous, 0 when none) and names `id`; runs
 * of other configurations keep theirs, so each configuration (workload,
 * machine, model, build, ...) has its own baseline. 0, or -1. */
int store_move_tag(store *s, int64_t id, const char *name, int64_t *previous);

/* Cached SHA-256 of a model file, keyed by path, size and mtime; 1 if found. */
int store_cached_hash(store *s, const char *path, int64_t size, int64_t mtime_ns, char out[65]);
void store_cache_hash(store *s, const char *path, int64_t size, int64_t mtime_ns, const char *hex);

/* Mark run id as part of the rate sweep whose saturation run is `sweep`; 0 or -1. */
int store_run_set_sweep(store *s, int64_t id, int64_t sweep);

/* The run's workload sidecar JSON (runs.workload_meta), malloc'd; NULL when
 * it has none or on error. */
char *store_run_workload_meta(store *s, int64_t run_id);

#endif

/*
 * store_sync.h - copying runs between two stores: `push` (a runner's SQLite
 * file to the fleet's server) and `pull` (a selection from the server into a
 * file for offline work) are the same copy in opposite directions.
 *
 * A run is identified by its UUID in every store. Each run is copied whole
 * in one transaction of the target: its row, its environment (matched by
 * fingerprint) with that machine's hw measurements (by UUID), and every row of its results
 * (repetition metrics, requests, counters, summary, canaries, per-adapter
 * statistics, server metrics); ids are the target's own. A run the target
 * holds already is skipped, so a copy run twice copies once, and a copy
 * that was killed resumes where it stopped (the runs it committed are
 * there, whole; the one it was writing is not there at all). Incomplete
 * runs (still running, or killed) are not copied. Tags, gates and verdicts
 * stay where they were made: a runner's "baseline" is its own decision,
 * and the fleet's gates are taken on the server.
 */
#ifndef CB_STORE_SYNC_H
#define CB_STORE_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* Which runs to copy; empty fields select all. */
typedef struct {
    const char *workload; /* runs.workload equal to it */
    const char *testbed;  /* runs.testbed equal to it */
    const char *since;    /* started_at >= it (ISO-8601 prefix: "2026-11-01") */
    const char *commit;   /* git_commit starting with it */
    int last;             /* only the newest N of those (0: all) */
} store_selection;

typedef struct {
    int copied;     /* runs written to the target */
    int present;    /* runs the target held already */
    int incomplete; /* selected runs not copied because they never finished */
} store_sync_stats;

/* Copy the selected runs of `from` that `to` lacks. Stops at the first run
 * that cannot be copied (that run is rolled back; the ones before stay). */
int store_sync_runs(store *from, store *to, const store_selection *sel, store_sync_stats *stats, char *err,
                    size_t errlen);

#endif

/*
 * store_row.h - reading one result row by column name: the only row helper
 * of the store's files (no column is read by position, so a query can gain
 * or reorder columns without breaking its reader), and the two values every
 * writer stamps (the time, a UUID). Store-internal: only the files of
 * harness/store/ include it.
 */
#ifndef CB_STORE_ROW_H
#define CB_STORE_ROW_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "store.h"

/* Prepare `sql` on the store with a bound to ?1 and b to ?2 (when the
 * query has them); NULL on error (store_errmsg says why). */
db_stmt *row_prepare(store *s, const char *sql, int64_t a, int64_t b);
/* Make room for one more element of `size` bytes in the array *v holding n
 * of capacity *cap (doubling); -1 when out of memory. */
int row_grow(void **v, int n, int *cap, size_t size);

/* The column of the current row named `name` (its alias in the query); a
 * missing name is a bug in the query, caught by an assertion. */
int row_col(db_stmt *st, const char *name);
/* Its text, "" when NULL. */
const char *row_text(db_stmt *st, const char *name);
/* Its number, NAN when NULL. */
double row_num(db_stmt *st, const char *name);
/* Its integer, 0 when NULL. */
int64_t row_int(db_stmt *st, const char *name);
/* 1 when it is NULL. */
int row_null(db_stmt *st, const char *name);
/* Copy its text into out (truncated to n - 1 bytes). */
void row_copy(db_stmt *st, const char *name, char *out, size_t n);

/* Now as ISO-8601 UTC with milliseconds (2026-11-27T15:50:16.123Z). */
void store_now(char *out, size_t n);
/* A fresh version-4 UUID (36 characters); -1 when the kernel gives no random bytes. */
int store_new_uuid(char out[37]);

#endif

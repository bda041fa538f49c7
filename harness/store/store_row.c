/*
 * store_row.c - see store_row.h. A linear search over the row's column
 * names: result rows here have at most a few dozen columns.
 */
#include "store_row.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sqlite3_stmt *row_prepare(store *s, const char *sql, int64_t a, int64_t b) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL) != SQLITE_OK) return NULL;
    int n = sqlite3_bind_parameter_count(st);
    if (n >= 1) sqlite3_bind_int64(st, 1, a);
    if (n >= 2) sqlite3_bind_int64(st, 2, b);
    return st;
}

int row_grow(void **v, int n, int *cap, size_t size) {
    if (n < *cap) return 0;
    int c = *cap ? *cap * 2 : 16;
    void *p = realloc(*v, (size_t)c * size);
    if (!p) return -1;
    *v = p;
    *cap = c;
    return 0;
}

int row_col(sqlite3_stmt *st, const char *name) {
    int n = sqlite3_column_count(st);
    for (int i = 0; i < n; i++) {
        const char *c = sqlite3_column_name(st, i);
        if (c && !strcmp(c, name)) return i;
    }
    assert(!"no such column in the query");
    return 0;
}

const char *row_text(sqlite3_stmt *st, const char *name) {
    const unsigned char *t = sqlite3_column_text(st, row_col(st, name));
    return t ? (const char *)t : "";
}

double row_num(sqlite3_stmt *st, const char *name) {
    int i = row_col(st, name);
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

int64_t row_int(sqlite3_stmt *st, const char *name) {
    return sqlite3_column_int64(st, row_col(st, name));
}

int row_null(sqlite3_stmt *st, const char *name) {
    return sqlite3_column_type(st, row_col(st, name)) == SQLITE_NULL;
}

void row_copy(sqlite3_stmt *st, const char *name, char *out, size_t n) {
    snprintf(out, n, "%s", row_text(st, name));
}

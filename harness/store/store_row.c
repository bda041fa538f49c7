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
#include <sys/random.h>
#include <time.h>

db_stmt *row_prepare(store *s, const char *sql, int64_t a, int64_t b) {
    db_stmt *st = db_prepare(store_db(s), sql);
    if (!st) return NULL;
    int n = db_param_count(st);
    if (n >= 1) db_bind_int(st, 1, a);
    if (n >= 2) db_bind_int(st, 2, b);
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

int row_col(db_stmt *st, const char *name) {
    int n = db_column_count(st);
    for (int i = 0; i < n; i++) {
        const char *c = db_column_name(st, i);
        if (c && !strcmp(c, name)) return i;
    }
    assert(!"no such column in the query");
    return 0;
}

const char *row_text(db_stmt *st, const char *name) {
    const char *t = db_column_text(st, row_col(st, name));
    return t ? t : "";
}

double row_num(db_stmt *st, const char *name) { return db_column_double(st, row_col(st, name)); }
int64_t row_int(db_stmt *st, const char *name) { return db_column_int(st, row_col(st, name)); }
int row_null(db_stmt *st, const char *name) { return db_column_null(st, row_col(st, name)); }

void row_copy(db_stmt *st, const char *name, char *out, size_t n) {
    snprintf(out, n, "%s", row_text(st, name));
}

/* ISO-8601 UTC timestamp with milliseconds. */
void store_now(char *out, size_t n) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t k = strftime(out, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + k, n - k, ".%03ldZ", ts.tv_nsec / 1000000);
}

/* See store_row.h: from the kernel's random source. */
int store_new_uuid(char out[37]) {
    uint8_t b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) return -1;
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    static const char hex[] = "0123456789abcdef";
    int k = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[k++] = '-';
        out[k++] = hex[b[i] >> 4];
        out[k++] = hex[b[i] & 15];
    }
    out[k] = 0;
    return 0;
}


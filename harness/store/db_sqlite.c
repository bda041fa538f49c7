/*
 * db_sqlite.c - the SQLite engine of db.h: a file opened in WAL mode with
 * foreign keys on, writers queueing at BEGIN IMMEDIATE for up to 30 s.
 */
#include "db_int.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hx_err.h"

typedef struct {
    db_stmt base;
    sqlite3_stmt *st;
    int64_t changes;
} lite_stmt;

#define LITE(d) ((sqlite3 *)(d)->h)
#define ST(s) (((lite_stmt *)(s))->st)

/* Switch to WAL. Two processes creating the same database race for this
 * pragma, and SQLite reports SQLITE_BUSY for it without consulting the busy
 * handler, so retry for up to the busy timeout. */
static int enable_wal(sqlite3 *h) {
    for (int attempt = 0;; attempt++) {
        int rc = sqlite3_exec(h, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
        if (rc == SQLITE_OK) return 0;
        if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || attempt >= 3000) return -1;
        usleep(10000);
    }
}

static int lite_open(db *d, const char *path, char *err, size_t errlen) {
    sqlite3 *h = NULL;
    if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        hx_fail(err, errlen, "%s: cannot open database: %s", path, h ? sqlite3_errmsg(h) : "out of memory");
        sqlite3_close(h);
        return -1;
    }
    sqlite3_busy_timeout(h, 30000); /* concurrent runs wait for each other's short transactions */
    const char *what = enable_wal(h) ? "enable WAL"
                       : sqlite3_exec(h, "PRAGMA foreign_keys = ON", NULL, NULL, NULL) ? "enable foreign keys"
                       : sqlite3_exec(h, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL) ? "set synchronous" : NULL;
    if (what) {
        hx_fail(err, errlen, "%s: %s: %s", path, what, sqlite3_errmsg(h));
        sqlite3_close(h);
        return -1;
    }
    d->h = h;
    return 0;
}

static void lite_close(db *d) { sqlite3_close(LITE(d)); }
static const char *lite_errmsg(db *d) { return sqlite3_errmsg(LITE(d)); }
static int lite_exec(db *d, const char *sql) { return sqlite3_exec(LITE(d), sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1; }
static int lite_begin(db *d) { return lite_exec(d, "BEGIN IMMEDIATE"); }
static int lite_lock_schema(db *d) { return 0; /* BEGIN IMMEDIATE holds the write lock */ }

static int lite_schema_version(db *d) {
    sqlite3_stmt *st;
    int v = -1;
    if (sqlite3_prepare_v2(LITE(d), "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

static int lite_set_schema_version(db *d, int v) {
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v);
    return lite_exec(d, sql);
}

static db_stmt *lite_prepare(db *d, const char *sql) {
    lite_stmt *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->base.d = d;
    if (sqlite3_prepare_v2(LITE(d), sql, -1, &s->st, NULL) != SQLITE_OK) {
        free(s);
        return NULL;
    }
    return &s->base;
}

static int lite_param_count(db_stmt *s) { return sqlite3_bind_parameter_count(ST(s)); }
static void lite_bind_int(db_stmt *s, int i, int64_t v) { sqlite3_bind_int64(ST(s), i, v); }
static void lite_bind_double(db_stmt *s, int i, double v) { sqlite3_bind_double(ST(s), i, v); }
static void lite_bind_text(db_stmt *s, int i, const char *v) { sqlite3_bind_text(ST(s), i, v, -1, SQLITE_TRANSIENT); }
static void lite_bind_null(db_stmt *s, int i) { sqlite3_bind_null(ST(s), i); }

static int lite_step(db_stmt *s) {
    int rc = sqlite3_step(ST(s));
    if (rc == SQLITE_DONE) ((lite_stmt *)s)->changes = sqlite3_changes(LITE(s->d));
    return rc == SQLITE_ROW ? DB_ROW : rc == SQLITE_DONE ? DB_DONE : DB_ERROR;
}

static void lite_reset(db_stmt *s) { sqlite3_reset(ST(s)); }
static int64_t lite_changes(db_stmt *s) { return ((lite_stmt *)s)->changes; }

static void lite_finalize(db_stmt *s) {
    sqlite3_finalize(ST(s));
    free(s);
}

static int lite_column_count(db_stmt *s) { return sqlite3_column_count(ST(s)); }
static const char *lite_column_name(db_stmt *s, int i) { return sqlite3_column_name(ST(s), i); }
static int lite_column_null(db_stmt *s, int i) { return sqlite3_column_type(ST(s), i) == SQLITE_NULL; }
static const char *lite_column_text(db_stmt *s, int i) { return (const char *)sqlite3_column_text(ST(s), i); }

static double lite_column_double(db_stmt *s, int i) {
    return sqlite3_column_type(ST(s), i) == SQLITE_NULL ? NAN : sqlite3_column_double(ST(s), i);
}
static int64_t lite_column_int(db_stmt *s, int i) { return sqlite3_column_int64(ST(s), i); }

static const char *lite_column_exact(db_stmt *s, int i, char *buf, size_t n) {
    if (sqlite3_column_type(ST(s), i) != SQLITE_FLOAT) return lite_column_text(s, i);
    snprintf(buf, n, "%.17g", sqlite3_column_double(ST(s), i));
    return buf;
}

const db_ops DB_SQLITE_OPS = {
    lite_open, lite_close, lite_errmsg, lite_exec, lite_begin, lite_lock_schema, lite_schema_version,
    lite_set_schema_version, lite_prepare, lite_param_count, lite_bind_int, lite_bind_double, lite_bind_text,
    lite_bind_null, lite_step, lite_reset, lite_changes, lite_finalize, lite_column_count, lite_column_name,
    lite_column_null, lite_column_text, lite_column_double, lite_column_int, lite_column_exact,
};
